/** The soak's chain, in a process of its own so its memory is not counted as the service's: prints its URL. */
import { startLocalChain } from '../../shared/dev/embedded/chain';
import { relayerAddress } from '../../shared/chain/keys';

(async () => {
  const chain = await startLocalChain({ endow: [await relayerAddress(process.env.RELAYER_SEED_TESTNET!)], blocks: 'instant' });
  process.stdout.write(`${JSON.stringify({ wsUrl: chain.wsUrl })}\n`);
  process.once('SIGTERM', () => void chain.stop().then(() => process.exit(0)));
})();
