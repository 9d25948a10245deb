import fs from 'node:fs/promises';
import path from 'node:path';
import Router from '@koa/router';
import { notFound } from '../../../shared/errors';
import { buildOpenApiDocument } from '../../openapi/document';

const SWAGGER_UI = path.dirname(require.resolve('swagger-ui-dist/package.json'));
const ASSETS: Record<string, string> = {
  'swagger-ui.css': 'text/css; charset=utf-8',
  'swagger-ui-bundle.js': 'application/javascript; charset=utf-8',
};

const PAGE = `<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>works-api reference</title><link rel="stylesheet" href="/docs/swagger-ui.css"></head>
<body><div id="reference"></div><script src="/docs/swagger-ui-bundle.js"></script><script src="/docs/init.js"></script></body>
</html>`;
const INIT = `window.ui = SwaggerUIBundle({ url: '/v1/openapi.json', dom_id: '#reference', deepLinking: true, defaultModelsExpandDepth: 0 });`;
// Swagger UI's own files only, from this server: no CDN.
const DOCS_CSP = "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; font-src 'self' data:; connect-src 'self'; frame-ancestors 'none'";

/** The OpenAPI document (generated from the same schemas the routes validate with) and its reference page. */
export function docsRouter(options: { includeDev: boolean }): Router {
  const router = new Router();
  const document = JSON.stringify(buildOpenApiDocument(options));
  router.get('/v1/openapi.json', (ctx) => {
    ctx.set('Cache-Control', 'public, max-age=300');
    ctx.type = 'application/json';
    ctx.body = document;
  });
  router.get('/docs', (ctx) => {
    ctx.set('Content-Security-Policy', DOCS_CSP);
    ctx.type = 'text/html; charset=utf-8';
    ctx.body = PAGE;
  });
  router.get('/docs/:asset', async (ctx) => {
    const asset = ctx.params.asset as string;
    ctx.set('Cache-Control', 'public, max-age=3600');
    if (asset === 'init.js') {
      ctx.type = 'application/javascript; charset=utf-8';
      ctx.body = INIT;
      return;
    }
    const type = ASSETS[asset];
    if (!type) throw notFound('Asset');
    ctx.type = type;
    ctx.body = await fs.readFile(path.join(SWAGGER_UI, asset));
  });
  return router;
}
