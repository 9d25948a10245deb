import { expect } from 'chai';
import fs from 'node:fs';
import path from 'node:path';

const SRC = path.resolve(__dirname, '../src');
const files = (dir: string): string[] =>
  fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? files(path.join(dir, e.name)) : [path.join(dir, e.name)]));

describe('@works-api/client: what the library imports', () => {
  it('imports nothing outside sdk/src but its declared runtime dependencies and Node’s built-ins: no server code', () => {
    const { dependencies } = JSON.parse(fs.readFileSync(path.resolve(__dirname, '../package.json'), 'utf8')) as {
      dependencies: Record<string, string>;
    };
    const outside: string[] = [];
    for (const file of files(SRC).filter((f) => f.endsWith('.ts'))) {
      const source = fs.readFileSync(file, 'utf8');
      for (const [, specifier] of source.matchAll(/(?:from|import|require)\s*\(?\s*['"]([^'"]+)['"]/g)) {
        const ok = specifier!.startsWith('.')
          ? path.resolve(path.dirname(file), specifier!).startsWith(SRC)
          : specifier!.startsWith('node:') || specifier! in dependencies;
        if (!ok) outside.push(`${path.relative(SRC, file)}: ${specifier}`);
      }
    }
    expect(outside).to.deep.equal([]);
  });
});
