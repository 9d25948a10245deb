import { readFileSync } from 'node:fs';
import path from 'node:path';
import { expect } from 'chai';
import { buildOpenApiDocument } from '../../web/openapi/document';
import { OPERATIONS } from '../../web/routes';
import {
  anchorsOf,
  apiDocAnchors,
  brokenLinks,
  isText,
  outsideReferences,
  repoReader,
  slug,
  stringsOf,
  trackedFiles,
  type Finding,
} from '../helpers/self-contained';

/**
 * The repository stands on its own: a user who clones it has the whole contract (docs/api.md), and nothing
 * a partner or an engineer reads points at files beside the checkout or cites the specification by section
 * number. Documentation and API text only: code imports such as `../shared/db/knex` are the repository's own
 * modules. Each detector is first shown to find what it looks for, so that none passes vacuously.
 */
const ROOT = path.resolve(__dirname, '../..');
/** What partners and engineers read: the README, the docs, the SDK's, the OpenAPI document's sources, the settings. */
const DOCUMENTATION = ['README.md', 'docs', 'sdk/README.md', 'sdk/docs', 'web/openapi', '.env.example'];
/** The markdown whose relative links must lead somewhere. */
const LINKED = ['README.md', 'docs/*.md', 'docs/**/*.md', 'sdk/README.md', 'sdk/docs/*.md'];
/** Tags of the partner-facing operations: each must name its section of docs/api.md. */
const PARTNER_TAGS = ['Registration', 'Versions', 'Works', 'Transactions', 'API keys', 'Sessions'];

const report = (what: string, findings: readonly Finding[]) =>
  expect(
    findings.map((f) => `${f.file}:${f.line}: ${f.text}`),
    what,
  ).to.deep.equal([]);

const apiAnchors = () => anchorsOf(readFileSync(path.join(ROOT, 'docs/api.md'), 'utf8'));

describe('the repository is self-contained', () => {
  describe('the detectors find what they look for', () => {
    it('paths outside the repository and citations of the specification by number', () => {
      const found = (file: string, text: string) => outsideReferences(file, text).map((f) => f.line);
      const prose = [
        'The contract is `../shared/spec/works-api.md`.', // 1
        'See /work/shared/spec/contract.md.', // 2
        'init validates spec 4.1 and', // 3
        'the fields of spec §6 and', // 4
        'the schedule of contract §7', // 5
        'the public contract (§5)', // 6
        'shapes (contract §§4–8)', // 7
        'the raw chain spec in @substrate/connect-known-chains', // 8: not a citation
        'see docs/api.md#webhooks, §3 of this page', // 9: a link, and a page's own section
        'rotation is by a new key (spec §5.6).', // 10
      ].join('\n');
      expect(found('README.md', prose)).to.deep.equal([1, 2, 3, 4, 5, 6, 7, 10]);
      const code = [
        "import { ERROR_STATUS } from '../../shared/errors';",
        "export { x } from '../shared/spec/thing';",
        "const y = await import('../shared/db/knex');",
        "summary: 'Quote a version (spec 4.7)',",
        '// see ../shared/spec/contract.md',
      ].join('\n');
      expect(found('web/openapi/x.ts', code)).to.deep.equal([4, 5]);
      // the same import line in prose is no import
      expect(found('docs/x.md', "import { x } from '../shared/spec/thing';")).to.deep.equal([1]);
    });

    it('the strings of a JSON document, wherever they sit', () => {
      const doc = { info: { description: 'a' }, paths: { '/x': { get: { summary: 'b', tags: ['c'] } } }, n: 1 };
      expect(stringsOf(doc).map((s) => s.text)).to.deep.equal(['a', 'b', 'c']);
    });

    it('anchors as GitHub makes them, and links that lead nowhere', () => {
      expect(slug('Registration: init')).to.equal('registration-init');
      expect(slug('Versions: init-upload')).to.equal('versions-init-upload');
      expect(slug('socket.io')).to.equal('socketio');
      expect(slug('The `ats` dialect')).to.equal('the-ats-dialect');
      const target = '# Title\n## Webhooks\n```\n## Not a heading\n```\n## Webhooks\n### Registration: init\n';
      expect([...anchorsOf(target)]).to.deep.equal(['title', 'webhooks', 'webhooks-1', 'registration-init']);
      const files: Record<string, string> = { 'docs/api.md': target, 'docs/other.md': '# Other\n', docs: '' };
      const read = (p: string) => files[p];
      const page = [
        '[ok](api.md#webhooks) [ok too](other.md) [dir](./) [web](https://example.com/x) [self](#other)', // 1
        '[gone](missing.md)', // 2
        '[bad anchor](api.md#not-there)', // 3
        '[outside](../../shared/spec/works-api.md)', // 4
        '`[in code](missing.md)`', // 5: code, not a link
        '```', // 6
        '[fenced](missing.md)', // 7: code, not a link
        '```', // 8
        '[ref]: nowhere.md', // 9
      ].join('\n');
      expect(brokenLinks('docs/other.md', page, read).map((f) => `${f.line} ${f.text}`)).to.deep.equal([
        '2 missing.md: no such file in the repository',
        '3 api.md#not-there: no heading makes #not-there in docs/api.md',
        '4 ../../shared/spec/works-api.md: outside the repository',
        '9 nowhere.md: no such file in the repository',
      ]);
      expect(apiDocAnchors('Contract: `docs/api.md#registration-init`; see docs/api.md#webhooks.')).to.deep.equal([
        'registration-init',
        'webhooks',
      ]);
    });
  });

  it('no documentation, and no code comment, names a file outside the repository or cites the specification by number', () => {
    // every source file too (its imports aside): a comment is read by whoever works on the code; this test and its
    // helper hold the patterns as examples
    const fixtures = ['test/unit/self-contained.test.ts', 'test/helpers/self-contained.ts'];
    const code = trackedFiles(ROOT, ['*.ts', '*.mjs', '*.js']).filter((file) => !fixtures.includes(file));
    expect(code).to.include.members(['web/routes/works-read/presenters.ts', 'shared/config.ts']);
    const files = [...trackedFiles(ROOT, DOCUMENTATION), ...code];
    expect(files).to.include.members(['README.md', 'docs/api.md', 'sdk/README.md', 'web/openapi/document.ts']);
    const findings = files.flatMap((file) => {
      const bytes = readFileSync(path.join(ROOT, file));
      return isText(bytes) ? outsideReferences(file, bytes.toString('utf8')) : [];
    });
    report('references outside the repository', findings);
  });

  it('neither does any text of the served OpenAPI document, and every section it names exists in docs/api.md', () => {
    const document = buildOpenApiDocument({ includeDev: true });
    const strings = stringsOf(document);
    report(
      'OpenAPI text pointing outside the repository',
      strings.flatMap((s) => outsideReferences('openapi.json', s.text).map((f) => ({ ...f, file: `openapi.json${s.path}` }))),
    );
    const anchors = apiAnchors();
    const named = strings.flatMap((s) => apiDocAnchors(s.text).map((anchor) => ({ at: s.path, anchor })));
    expect(named.length, 'the document names sections of docs/api.md').to.be.greaterThan(20);
    expect(
      named.filter((n) => !anchors.has(n.anchor)).map((n) => `${n.at}: docs/api.md#${n.anchor}`),
      'sections named that docs/api.md has no heading for',
    ).to.deep.equal([]);
    expect(
      OPERATIONS.filter((op) => PARTNER_TAGS.includes(op.tag) && !op.docs).map((op) => `${op.method} ${op.path}`),
      'partner operations without their section of docs/api.md',
    ).to.deep.equal([]);
  });

  it('every relative link of the README and the docs leads to a file of the repository, and to a heading there', () => {
    const files = trackedFiles(ROOT, LINKED);
    expect(files).to.include.members(['README.md', 'docs/api.md', 'docs/operations/runbook.md', 'sdk/docs/webhooks.md']);
    const read = repoReader(ROOT);
    report(
      'links that lead nowhere',
      files.flatMap((file) => brokenLinks(file, readFileSync(path.join(ROOT, file), 'utf8'), read)),
    );
  });

  it('every section of docs/api.md that code or documentation names exists', () => {
    const anchors = apiAnchors();
    const missing = trackedFiles(ROOT, ['*.ts', '*.md', '*.yml', '.env.example']).flatMap((file) =>
      readFileSync(path.join(ROOT, file), 'utf8')
        .split('\n')
        .flatMap((line, i) =>
          apiDocAnchors(line)
            .filter((a) => !anchors.has(a))
            .map((a) => ({ file, line: i + 1, text: `docs/api.md#${a}` })),
        ),
    );
    report('sections of docs/api.md named but missing', missing);
  });
});
