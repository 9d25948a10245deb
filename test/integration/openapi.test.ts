import { expect } from 'chai';
import SwaggerParser from '@apidevtools/swagger-parser';
import type Router from '@koa/router';
import { call, startApp, type TestApp } from '../helpers/app';
import { configWith } from '../helpers/services';
import { createWebApp } from '../../web/app';
import { buildOpenApiDocument } from '../../web/openapi/document';
import { OPERATIONS } from '../../web/routes';

describe('the OpenAPI document', () => {
  let app: TestApp;
  before(async () => (app = await startApp()));
  after(() => app.close());

  it('is served at /v1/openapi.json and is a valid OpenAPI 3.1 document', async () => {
    const reply = await call(app.url, 'GET', '/v1/openapi.json');
    expect(reply.status).to.equal(200);
    expect(reply.body.openapi).to.equal('3.1.0');
    expect(reply.body).to.deep.equal(JSON.parse(JSON.stringify(buildOpenApiDocument())));
    // swagger-parser dereferences in place: give it a copy
    const api = await SwaggerParser.validate(structuredClone(reply.body));
    expect(Object.keys(api.paths ?? {})).to.include('/v1/works/init');
    expect(Object.keys(reply.body.webhooks)).to.have.members(['work_registered', 'work_updated', 'work_failed']);
    // the request bodies are the very schemas the routes validate with
    const init = reply.body.paths['/v1/works/init'].post;
    expect(init.requestBody.content['application/json'].schema.required).to.have.members(['network', 'title', 'filename', 'creators']);
    expect(init.parameters.map((p: { name: string }) => p.name)).to.include('Idempotency-Key');
    expect(Object.keys(init.responses)).to.include.members(['200', '401', '403', '409', '422', '429']);
  });

  it('describes every route the server registers, and registers every route it describes', () => {
    // the development shape, so the embedded identity provider's route is served too
    const koa = createWebApp({ ...app.context, config: configWith({ DEV_IDP_KEY_FILE: '/dev/null' }) });
    const served = new Set<string>();
    for (const middleware of koa.middleware as unknown as { router?: Router }[]) {
      for (const layer of middleware.router?.stack ?? []) {
        const path = String(layer.path)
          .replace(/:([A-Za-z_]+)/g, '{$1}')
          .replace(/(.)\/$/, '$1');
        for (const method of layer.methods.filter((m) => m !== 'HEAD')) served.add(`${method.toLowerCase()} ${path}`);
      }
    }
    served.add('get /admin/queues'); // Bull Board, mounted as middleware (answering 401 below proves it is there)
    served.add('get /v1/ws/transactions/{transaction_id}'); // the upgrade, handled on the HTTP server (web/ws, its own tests)
    const described = new Set(OPERATIONS.map((op) => `${op.method} ${op.path}`));
    expect(
      [...served].filter((r) => !described.has(r)),
      'served but not described',
    ).to.deep.equal([]);
    expect(
      [...described].filter((r) => !served.has(r)),
      'described but not served',
    ).to.deep.equal([]);
  });

  it('renders a reference page at /docs from the package, without a CDN', async () => {
    const page = await call(app.url, 'GET', '/docs');
    expect(page.status).to.equal(200);
    expect(page.headers.get('content-type')).to.match(/text\/html/);
    expect(page.headers.get('content-security-policy')).to.match(/script-src 'self'/);
    expect(page.text).to.not.match(/https?:\/\//);
    for (const asset of ['swagger-ui-bundle.js', 'swagger-ui.css', 'init.js']) {
      const reply = await call(app.url, 'GET', `/docs/${asset}`);
      expect(reply.status, asset).to.equal(200);
      expect(reply.text.length).to.be.above(10);
    }
    expect((await call(app.url, 'GET', '/docs/package.json')).status).to.equal(404);
    expect((await call(app.url, 'GET', '/admin/queues')).status).to.equal(401);
  });
});
