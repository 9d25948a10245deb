import path from 'node:path';
import { expect } from 'chai';
import {
  describeCycle,
  importCycles,
  importEdges,
  lex,
  lineCount,
  longModules,
  migrationTables,
  namesTable,
  readSources,
  sharedTables,
  stateCasts,
  type Sources,
} from '../helpers/shape';

/**
 * The shape of the source tree, by static analysis of the files alone (no services): no import cycle among
 * shared/, web/ and jobs/ (type-only imports count: a cycle of types still ties two modules to each other);
 * no module of shared/ over 300 lines; each table named in SQL by one module only; no cast of ctx.state in
 * web/. Each detector is first shown to find what it looks for on fixtures, so that none passes vacuously.
 */
const ROOT = path.resolve(__dirname, '../..');
const MAX_LINES = 300;

const fixture = (files: Record<string, string>): Sources => new Map(Object.entries(files));
const fail = (what: string, lines: readonly string[]) => expect.fail(`${what} (${lines.length}):\n    ${lines.join('\n    ')}`);

describe('source shape', () => {
  describe('the detectors, on fixtures', () => {
    it('lex drops comments, keeps line numbers and collects string literals', () => {
      const lexed = lex(`const a = 'x'; // import './b'\n/* from works\n */ const u = "http://h/p";\nconst t = \`select 1 from works\`;`);
      expect(lexed.code).to.not.include('import');
      expect(lexed.code.split('\n')).to.have.length(4);
      expect(lexed.strings).to.deep.equal(['x', 'http://h/p', 'select 1 from works']);
    });

    it('finds a cycle of two files, through a type-only import or a dynamic one, and none in a chain', () => {
      const files = fixture({
        'shared/a.ts': `import { b } from './b';\nexport const a = 1;`,
        'shared/b.ts': `import type { A } from './a';\nexport const b = 2;`,
        'web/c.ts': `import { a } from '../shared/a';\nconst d = await import('./d');`,
        'web/d.ts': `export * from '../web/c';`,
        'jobs/e.ts': `// import { c } from '../web/c';\nimport { x } from 'some-package';\nimport { a } from '../shared/a.js';`,
        'shared/dir/index.ts': `export { b } from '../b';`,
        'shared/f.ts': `import { b } from './dir';`,
      });
      const edges = importEdges(files);
      expect(edges).to.deep.include({ from: 'shared/b.ts', to: 'shared/a.ts', typeOnly: true });
      expect(edges).to.deep.include({ from: 'jobs/e.ts', to: 'shared/a.ts', typeOnly: false });
      expect(edges).to.deep.include({ from: 'shared/f.ts', to: 'shared/dir/index.ts', typeOnly: false });
      expect(
        edges.some((e) => e.from === 'jobs/e.ts' && e.to === 'web/c.ts'),
        'an import in a comment',
      ).to.equal(false);
      expect(importCycles(files, edges)).to.deep.equal([
        ['shared/a.ts', 'shared/b.ts'],
        ['web/c.ts', 'web/d.ts'],
      ]);
      expect(describeCycle(['shared/a.ts', 'shared/b.ts'], edges)).to.include('shared/b.ts → shared/a.ts (type)');
      expect(importCycles(fixture({ 'shared/a.ts': `import './b';`, 'shared/b.ts': `import './c';`, 'shared/c.ts': '' }))).to.deep.equal(
        [],
      );
    });

    it('counts lines and finds the modules over the limit', () => {
      expect([lineCount(''), lineCount('a'), lineCount('a\n'), lineCount('a\nb')]).to.deep.equal([0, 1, 1, 2]);
      const files = fixture({ 'shared/long.ts': 'x\n'.repeat(MAX_LINES + 1), 'shared/ok.ts': 'x\n'.repeat(MAX_LINES) });
      expect(longModules(files, MAX_LINES)).to.deep.equal([{ file: 'shared/long.ts', lines: MAX_LINES + 1 }]);
    });

    it('finds the tables the migrations create, and a table named in SQL by two files', () => {
      expect(
        migrationTables(
          fixture({
            'migrations/1.ts': `await knex.schema.createTable('works', (t) => {});\nawait knex.raw('CREATE TABLE IF NOT EXISTS "events" (id int)');`,
          }),
        ),
      ).to.deep.equal(['events', 'works']);
      const sql = (code: string) => namesTable(lex(code), 'works');
      for (const code of [
        `await db('works').where({ id })`,
        `await trx('works as w').select('*')`,
        `this.app.db<WorkRow>('works').first()`,
        `q.from('works')`,
        `q.into('works')`,
        `q.leftJoin('works', 'w.id', 'x.work_id')`,
        `knex.schema.table('works', () => {})`,
        `db.raw('SELECT count(*) FROM works WHERE id = ?')`,
        `db.raw(\`insert into "works" (id) values (?)\`)`,
        `sql = 'UPDATE works SET title = ?'`,
        `sql = 'select 1 from a join works on true'`,
        `sql = 'TRUNCATE TABLE works'`,
      ])
        expect(sql(code), code).to.equal(true);
      for (const code of [
        `db('work_versions')`,
        `import { works } from './works'`,
        `// from works`,
        `log.info('works')`,
        `'select * from works_count'`,
        `q.where('works', 1)`,
      ])
        expect(sql(code), code).to.equal(false);
      const files = fixture({
        'shared/works/store.ts': `export const byId = (db, id) => db('works').where({ id });`,
        'web/routes/works.ts': `const n = await ctx.db.raw('select count(*) from works');`,
        'jobs/events.ts': `await trx('events').insert(row);`,
      });
      expect(Object.fromEntries(sharedTables(files, ['events', 'works']))).to.deep.equal({
        works: ['shared/works/store.ts', 'web/routes/works.ts'],
      });
    });

    it('finds casts of ctx.state, and not other casts', () => {
      const files = fixture({
        'web/a.ts': `const a = ctx.state.auth as ApiKeyAuth;\nconst b = (ctx.state as State).x;\nconst c = ctx.state?.auth as X;`,
        'web/b.ts': `const s = ctx.state;\nconst n = value as number;\n// ctx.state.auth as X\nconst k = ['a'] as const;`,
      });
      expect(stateCasts(files).map((f) => f.split(':').slice(0, 2).join(':'))).to.deep.equal(['web/a.ts:1', 'web/a.ts:2', 'web/a.ts:3']);
    });
  });

  describe('the tree', () => {
    const code = readSources(ROOT, ['shared', 'web', 'jobs']);
    const inFolder = (folder: string) => new Map([...code].filter(([file]) => file.startsWith(`${folder}/`)));

    it('reads the tree', () => {
      for (const folder of ['shared', 'web', 'jobs']) expect(inFolder(folder).size, folder).to.be.greaterThan(0);
    });

    it('has no import cycle among shared/, web/ and jobs/', () => {
      const edges = importEdges(code);
      expect(edges.length, 'imports resolved').to.be.greaterThan(50);
      const cycles = importCycles(code, edges);
      if (cycles.length)
        fail(
          'import cycles (strongly connected components of more than one file; "(type)": a type-only import)',
          cycles.map((c) => describeCycle(c, edges)),
        );
    });

    it(`has no module of shared/ over ${MAX_LINES} lines`, () => {
      const long = longModules(inFolder('shared'), MAX_LINES);
      if (long.length)
        fail(
          `modules of shared/ over ${MAX_LINES} lines`,
          long.map((m) => `${m.file}: ${m.lines} lines`),
        );
    });

    it('names each table in SQL from one module only', () => {
      const tables = migrationTables(readSources(ROOT, ['migrations']));
      expect(tables.length, 'tables the migrations create').to.be.greaterThan(5);
      const shared = sharedTables(code, tables);
      if (shared.size)
        fail(
          'tables named in SQL by more than one module',
          [...shared].map(([table, files]) => `${table} (${files.length}): ${files.join(', ')}`),
        );
    });

    it('never casts ctx.state in web/', () => {
      const casts = stateCasts(inFolder('web'));
      if (casts.length) fail('casts of ctx.state in web/', casts);
    });
  });
});
