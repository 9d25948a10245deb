import { expect } from 'chai';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { benchArgs, parseBenchArgs } from '../../bench/lib/options';
import { perfFlags } from '../../bench/lib/processes';

/**
 * `npm run bench -- --perf` (docs/performance.md, Reproduce): the service's processes started with V8's flags for
 * perf, so that a CPU-only profile names their compiled JavaScript. The flags must reach each bench process and be
 * ones this Node accepts and acts on.
 */
describe('the benches’ --perf switch', () => {
  it('is parsed, and passed on to each bench process', () => {
    expect(parseBenchArgs(['webhooks', '--perf']).perf).to.equal(true);
    expect(parseBenchArgs(['webhooks']).perf).to.equal(false);
    expect(benchArgs(parseBenchArgs(['--perf']))).to.include('--perf');
    expect(benchArgs(parseBenchArgs([]))).not.to.include('--perf');
    expect(perfFlags(false)).to.deep.equal([]);
  });

  it('starts Node so that it writes its compiled code for perf (jit-<pid>.dump in the working directory)', () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'bench-perf-'));
    try {
      execFileSync(process.execPath, [...perfFlags(true), '-e', 'let s = 0; for (let i = 0; i < 1e6; i++) s += i; void s'], { cwd: dir });
      const dumps = readdirSync(dir).filter((f) => /^jit-\d+\.dump$/.test(f));
      expect(dumps).to.have.length(1);
      expect(statSync(path.join(dir, dumps[0]!)).size).to.be.greaterThan(0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
