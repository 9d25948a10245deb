import { PassThrough } from 'node:stream';
import { expect } from 'chai';
import { logger as polkadotLogger } from '@polkadot/util';
import { createLogger } from '../../shared/logger';
import { devLogDestination } from '../../shared/dev/log-destination';
import { AWS_NODE_VERSION_SWITCH, isMetadataApiNotice, quietDependencyNotices } from '../../shared/dev/quiet';
import type { Env } from '../../shared/config';

/** `npm run dev`'s terminal: dependency notices filtered narrowly, logs readable on a TTY and JSON elsewhere. */
describe('npm run dev: a quiet, readable terminal', () => {
  describe('dependency notices', () => {
    const original = console.warn;
    let warned: unknown[][];
    beforeEach(() => {
      warned = [];
      console.warn = (...args: unknown[]) => void warned.push(args);
    });
    afterEach(() => (console.warn = original));

    it("drops @polkadot/api's MetadataApi notice, as its logger prints it, and nothing else", () => {
      quietDependencyNotices({});
      polkadotLogger('api/init').warn('MetadataApi not available, rpc::state::get_metadata will be used.');
      polkadotLogger('api/init').warn('Not decorating unknown runtime apis: Foo/1');
      polkadotLogger('api-ws').warn('MetadataApi not available, from another origin');
      console.warn('MetadataApi not available');
      expect(warned.map((args) => args.slice(-2).join(' '))).to.deep.equal([
        '       API/INIT: Not decorating unknown runtime apis: Foo/1',
        '         API-WS: MetadataApi not available, from another origin',
        'MetadataApi not available',
      ]);
    });

    it('matches the notice by origin and message only', () => {
      expect(isMetadataApiNotice(['2026-11-26', '       API/INIT:', 'MetadataApi not available, rpc'])).to.equal(true);
      expect(isMetadataApiNotice(['2026-11-26', '       API/INIT:', 'RPC methods not decorated'])).to.equal(false);
      expect(isMetadataApiNotice(['2026-11-26', '        API/RPC:', 'MetadataApi not available'])).to.equal(false);
    });

    it("turns the AWS SDK's Node version notice off by its own switch, keeping a value the user set", () => {
      const env: Env = {};
      quietDependencyNotices(env);
      expect(env[AWS_NODE_VERSION_SWITCH]).to.equal('true');
      const chosen: Env = { [AWS_NODE_VERSION_SWITCH]: 'false' };
      quietDependencyNotices(chosen);
      expect(chosen[AWS_NODE_VERSION_SWITCH]).to.equal('false');
    });
  });

  describe('logs', () => {
    const capture = (isTTY: boolean) => {
      const out = Object.assign(new PassThrough(), { isTTY });
      let text = '';
      out.on('data', (chunk: Buffer) => (text += chunk.toString()));
      return { out, text: () => text };
    };

    it('on a terminal: pretty lines, a request on one line, the fields of other entries kept', () => {
      const { out, text } = capture(true);
      const log = createLogger('info', devLogDestination(out)).child({ process: 'web' });
      log.info({ request_id: 'r-1', method: 'GET', url: '/docs', status: 200, ms: 1.5 }, 'request');
      log.error({ request_id: 'r-2', err: { message: 'boom' } }, 'unhandled error');
      const plain = text().replace(/\x1b\[[0-9;]*m/g, '');
      const lines = plain.split('\n');
      expect(lines[0]).to.match(/^\[\d\d:\d\d:\d\d\.\d{3}\] INFO: web: GET \/docs 200 1\.5 ms$/);
      expect(lines[1]).to.match(/^\[\d\d:\d\d:\d\d\.\d{3}\] ERROR: web: unhandled error$/);
      expect(plain).to.include('request_id: "r-2"').and.include('boom').and.not.include('r-1');
      expect(plain).to.not.include('{"level"');
    });

    it('to a pipe or a file: JSON lines, as in production', () => {
      expect(devLogDestination(capture(false).out)).to.equal(undefined);
    });
  });
});
