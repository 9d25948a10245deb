import fs from 'node:fs/promises';
import path from 'node:path';
import { notFound } from '../../../shared/errors';
import { defineRoute, type Route } from '../../http/route';

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
const INIT =
  "window.ui = SwaggerUIBundle({ url: '/v1/openapi.json', dom_id: '#reference', deepLinking: true, defaultModelsExpandDepth: 0 });";
// Swagger UI's own files only, from this server: no CDN.
const DOCS_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; font-src 'self' data:; " +
  "connect-src 'self'; frame-ancestors 'none'";

const operations = { method: 'get', tag: 'Operations', security: 'none', errors: [] } as const;

/** The OpenAPI document (generated from these very route definitions) and its reference page. */
export const docsRoutes: readonly Route[] = [
  defineRoute({
    ...operations,
    path: '/v1/openapi.json',
    id: 'openapi',
    summary: 'This document',
    responses: { 200: { description: 'OpenAPI 3.1', schema: { type: 'object' } } },
    handler: (ctx, _input, { openApiJson }) => {
      ctx.set('Cache-Control', 'public, max-age=300');
      ctx.type = 'application/json';
      ctx.body = openApiJson;
    },
  }),
  defineRoute({
    ...operations,
    path: '/docs',
    id: 'reference',
    summary: 'This document as a reference page',
    responses: { 200: { description: 'HTML', contentType: 'text/html' } },
    handler: (ctx) => {
      ctx.set('Content-Security-Policy', DOCS_CSP);
      ctx.type = 'text/html; charset=utf-8';
      ctx.body = PAGE;
    },
  }),
  defineRoute({
    ...operations,
    path: '/docs/{asset}',
    id: 'referenceAsset',
    summary: 'The reference page’s script and style (Swagger UI, served from the package)',
    responses: { 200: { description: 'Asset', contentType: 'application/octet-stream' } },
    handler: async (ctx, { params }) => {
      const asset = params.asset;
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
    },
  }),
];
