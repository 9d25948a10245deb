/**
 * `npm run generate -w @works-api/client`: writes src/generated/openapi.ts from the OpenAPI document the server
 * serves, built here by the server's own web/openapi/document.ts (the script may import server code; the library
 * never does). `--check` writes nothing and exits 1 when the checked-in file differs.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { buildOpenApiDocument } from '../../web/openapi/document';
import { GENERATED_FILE, REGENERATE, generateTypes } from './openapi-types';

async function main(): Promise<void> {
  const file = path.resolve(__dirname, '..', GENERATED_FILE);
  // what production serves: the development-only operations are left out
  const source = await generateTypes(JSON.parse(JSON.stringify(buildOpenApiDocument())));
  if (process.argv.includes('--check')) {
    const current = await fs.readFile(file, 'utf8').catch(() => '');
    if (current !== source) {
      process.stderr.write(`${GENERATED_FILE} is not in step with the OpenAPI document: run \`${REGENERATE}\`\n`);
      process.exit(1);
    }
    process.stdout.write(`${GENERATED_FILE} is in step\n`);
    return;
  }
  await fs.mkdir(path.dirname(file), { recursive: true });
  await fs.writeFile(file, source);
  process.stdout.write(`wrote ${path.relative(process.cwd(), file)}\n`);
}

main().catch((err) => {
  process.stderr.write(`generate failed: ${(err as Error).stack ?? err}\n`);
  process.exit(1);
});
