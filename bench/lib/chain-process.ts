import { blake2AsHex } from '@polkadot/util-crypto';
import { startLocalChain } from '../../shared/dev/embedded/chain';
import type { ChainBlock } from './processes';

/**
 * The pipeline bench's chopsticks chain in a process of its own (forked by processes.ts), so that /proc gives the
 * chain node's CPU apart from the bench's clients and receiver: the same startLocalChain `npm run dev` runs
 * in-process. Arguments: the block time in ms (or `instant`) and the address to endow. Sends `{ type: 'ready',
 * wsUrl }`; answers `{ type: 'blocks', through }` with every block built so far, each with this process's CPU (ms,
 * every thread: the RPC server and the wasm executor) when it was built, once block `through` is among them;
 * `{ type: 'stop' }` stops the chain and exits.
 *
 * Why wait for `through`: chopsticks tells its subscribers of a new head (setHead) before the building it awaits
 * returns, and that telling itself awaits storage reads on the wasm worker. So the service can see a block
 * finalized, send its webhooks, and the bench ask here for the blocks, before the block's own record is made: on
 * a loaded machine the record of the one block that carried every registration was missing from the answer.
 */
async function main(): Promise<void> {
  const [blocks, endow] = process.argv.slice(2);
  const built: ChainBlock[] = [];
  const waiting: { through: number; answer: () => void }[] = [];
  const answerWaiting = () => {
    const head = built.at(-1)?.number ?? -1;
    for (const w of waiting.filter((w) => w.through <= head)) {
      waiting.splice(waiting.indexOf(w), 1);
      w.answer();
    }
  };
  const cpuMs = () => {
    const usage = process.cpuUsage();
    return (usage.user + usage.system) / 1000;
  };
  const chain = await startLocalChain({
    endow: [endow!],
    blocks: blocks === 'instant' ? 'instant' : Number(blocks),
    onBlock: (block) => {
      built.push({ ...block, cpuMs: cpuMs() });
      answerWaiting();
    },
    // chopsticks drops them without a word: said here, so that a run whose calls never land shows why
    onRefused: (extrinsic, reason) => process.stderr.write(`chain: a block's building refused ${blake2AsHex(extrinsic)}: ${reason}\n`),
  });
  process.on('message', async (message: { type: string; through?: number }) => {
    if (message.type === 'blocks') {
      // a build that failed after telling its head never records it: answer with what there is after 30 s
      const timer = setTimeout(() => {
        waiting.splice(waiting.indexOf(entry), 1);
        entry.answer();
      }, 30_000);
      const entry = {
        through: message.through ?? -1,
        answer: () => {
          clearTimeout(timer);
          process.send!({ type: 'blocks', blocks: built });
        },
      };
      waiting.push(entry);
      answerWaiting();
    } else if (message.type === 'stop') {
      await chain.stop().catch(() => undefined);
      process.exit(0);
    }
  });
  process.send!({ type: 'ready', wsUrl: chain.wsUrl });
}

main().catch((err) => {
  process.stderr.write(`${(err as Error).stack}\n`);
  process.exit(1);
});
