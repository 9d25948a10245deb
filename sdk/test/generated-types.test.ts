import { expect } from 'chai';
import fs from 'node:fs/promises';
import path from 'node:path';
import { startApp, type TestApp } from '../../test/helpers/app';
import { GENERATED_FILE, REGENERATE, generateTypes } from '../scripts/openapi-types';

describe('@works-api/client: the generated types', () => {
  let app: TestApp;
  before(async () => (app = await startApp()));
  after(() => app.close());

  it('are in step with the document a running app serves at GET /v1/openapi.json', async () => {
    const served = await (await fetch(`${app.url}/v1/openapi.json`)).json();
    const fresh = await generateTypes(served);
    const checkedIn = await fs.readFile(path.resolve(__dirname, '..', GENERATED_FILE), 'utf8');
    if (checkedIn !== fresh)
      expect.fail(`sdk/${GENERATED_FILE} is not in step with the served OpenAPI document: run \`${REGENERATE}\` and commit it`);
    expect(checkedIn).to.include('"/v1/works/init"');
  });
});
