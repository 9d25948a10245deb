import { startLocalChain } from '../../shared/dev/embedded/chain';
import type { ChainBlock } from './processes';

/**
 * The pipeline bench's chopsticks chain in a process of its own (forked by processes.ts), so that /proc gives the
 * chain node's CPU apart from the bench's clients and receiver: the same startLocalChain `npm run dev` runs
 * in-process. Arguments: the block time in ms (or `instant`) and the address to endow. Sends `{ type: 'ready',
 * wsUrl }`; answers `{ type: 'blocks' }` with every block built so far, each with this process's CPU (ms, every
 * thread: the RPC server and the wasm executor) when it was built; `{ type: 'stop' }` stops the chain and exits.
 */
async function main(): Promise<void> {
  const [blocks, endow] = process.argv.slice(2);
  const built: ChainBlock[] = [];
  const cpuMs = () => {
    const usage = process.cpuUsage();
    return (usage.user + usage.system) / 1000;
  };
  const chain = await startLocalChain({
    endow: [endow!],
    blocks: blocks === 'instant' ? 'instant' : Number(blocks),
    onBlock: (block) => built.push({ ...block, cpuMs: cpuMs() }),
  });
  process.on('message', async (message: { type: string }) => {
    if (message.type === 'blocks') process.send!({ type: 'blocks', blocks: built });
    else if (message.type === 'stop') {
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
