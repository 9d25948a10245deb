import path from 'node:path';
import os from 'node:os';
import { promises as fs } from 'node:fs';
import { expect } from 'chai';
import { devOperatorAccess } from '../../shared/dev/operator-credential';

/** The way into Bull Board under `npm run dev`: the user's credential, else one generated once and kept. */
describe("npm run dev's operator credential", () => {
  let dir: string;
  let devEnv: string;
  beforeEach(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'works-devop-'));
    devEnv = path.join(dir, 'dev.env');
  });
  afterEach(() => fs.rm(dir, { recursive: true, force: true }));

  it('generates one on the first start, then keeps the one dev.env holds', async () => {
    const first = await devOperatorAccess({}, 'development', devEnv);
    if (first.source !== 'development') throw new Error(`unexpected ${first.source}`);
    expect(first.username).to.equal('operator');
    expect(first.password).to.match(/^[\w-]{24}$/);
    expect(first.credential).to.equal(`operator:${first.password}`);
    expect(await devOperatorAccess({}, 'development', devEnv)).to.not.deep.equal(first); // nothing written yet: a fresh one

    await fs.writeFile(devEnv, `REDIS_URL=redis://127.0.0.1:6379\nOPERATOR_CREDENTIAL=${first.credential}\n`);
    expect(await devOperatorAccess({}, 'development', devEnv)).to.deep.equal(first);
  });

  it("uses the user's OPERATOR_CREDENTIAL, and makes none up in production", async () => {
    await fs.writeFile(devEnv, 'OPERATOR_CREDENTIAL=operator:kept-from-an-earlier-start\n');
    expect(await devOperatorAccess({ OPERATOR_CREDENTIAL: 'ops:mine-and-long-enough' }, 'development', devEnv)).to.deep.equal({
      source: 'environment',
      username: 'ops',
    });
    expect(await devOperatorAccess({}, 'production', devEnv)).to.deep.equal({ source: 'none' });
  });
});
