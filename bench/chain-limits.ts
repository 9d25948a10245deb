import { randomBytes } from 'node:crypto';
import { ApiPromise, WsProvider } from '@polkadot/api';
import { Keyring } from '@polkadot/keyring';
import { cryptoWaitReady } from '@polkadot/util-crypto';
import { startLocalChain } from '../shared/dev/embedded/chain';
import { fitBatch } from '../shared/chain/batch';
import { benchMain, say } from './lib/main';
import { BenchReport } from './lib/report';
import { anchorCall, chainCapacity } from './lib/chain-floor';

/**
 * The chain's own limits, for the capacity model (docs/capacity.md): read from the runtime the benches and
 * `npm run dev` run (chopsticks executing Rococo Asset Hub), with one real anchor call of the `remark` dialect
 * (the owner's signature inside, as a chain worker builds it). How many such calls one block takes, from the
 * normal class's block weight and block length (each apart, and which binds); how many the service puts in one
 * relayer batch (`fitBatch`, the submitter's own sizing: 75% of the per-extrinsic weight and block length,
 * the utility pallet's limit, CHAIN_BATCH_MAX); so how many batches fill a block; and the chain's ceiling in
 * registrations a day at a block every 2 s (the local chain's), 6 s and 12 s. Nothing here is timed: the
 * figures are the runtime's constants and `paymentInfo` weights, the same on every run and machine.
 */
const CHAIN_BATCH_MAX = 1000; // the service's default (shared/config.ts)
const BLOCK_TIMES_S = [2, 6, 12];
const DAY_S = 86_400;

benchMain(async (options) => {
  await cryptoWaitReady();
  const relayer = new Keyring({ type: 'sr25519' }).addFromUri(`//bench-chain-limits-${randomBytes(4).toString('hex')}`);
  const chain = await startLocalChain({ endow: [relayer.address], blocks: 'instant' });
  const api = await ApiPromise.create({ provider: new WsProvider(chain.wsUrl), noInitWarn: true });
  try {
    const callHex = await anchorCall(api, relayer.address, 1);
    const call = { method: api.createType('Call', callHex) };
    const capacity = await chainCapacity(api, callHex, relayer.address);
    const perBatch = await fitBatch(api, relayer, Array<string>(CHAIN_BATCH_MAX).fill(callHex), CHAIN_BATCH_MAX);
    const weights = api.consts.system.blockWeights;
    const runtime = `${api.runtimeVersion.specName.toString()} ${api.runtimeVersion.specVersion.toString()}`;
    const fits = {
      refTime: Math.floor((capacity.block.refTime - capacity.perCall.refTime) / capacity.perCall.refTime) + 1,
      length: Math.floor((capacity.block.length - capacity.perCall.length) / capacity.perCall.length) + 1,
    };
    const report = new BenchReport('chain-limits', options.smoke, {
      runtime,
      dialect: 'remark',
      call: { section: call.method.section, method: call.method.method, encoded_length: call.method.encodedLength },
      chain_batch_max: CHAIN_BATCH_MAX,
      block_weights: weights.toJSON(),
      block_length: api.consts.system.blockLength.toJSON(),
      chain_capacity: capacity,
    });
    say(`chain-limits: ${runtime}, one ${call.method.section}.${call.method.method} of ${call.method.encodedLength} bytes`);
    const one = (id: string, label: string, unit: string, value: number) => report.add({ id, label, unit, runs: [value] });
    one('call_ref_time_us', 'one anchor call in a batch: ref time', 'µs', capacity.perCall.refTime / 1e6);
    one('call_proof_size_bytes', 'one anchor call in a batch: proof size', 'bytes', capacity.perCall.proofSize);
    one('call_length_bytes', 'one anchor call in a batch: encoded length', 'bytes', capacity.perCall.length);
    one('block_normal_ref_time_ms', 'block: normal class ref time (less the base block)', 'ms', capacity.block.refTime / 1e9);
    one('block_normal_length_kib', 'block: normal class length', 'KiB', capacity.block.length / 1024);
    one('calls_per_block_by_ref_time', 'anchor calls per block, by ref time', 'calls', fits.refTime);
    one('calls_per_block_by_length', 'anchor calls per block, by length', 'calls', fits.length);
    one('calls_per_block', `anchor calls per block (bound by ${capacity.boundBy})`, 'calls', capacity.callsPerBlock);
    one('calls_per_batch', "anchor calls per relayer batch (the submitter's fitBatch)", 'calls', perBatch);
    one('batches_per_block', 'relayer batches to fill a block', 'batches', Math.ceil(capacity.callsPerBlock / perBatch));
    for (const seconds of BLOCK_TIMES_S) {
      one(
        `registrations_per_day_${seconds}s`,
        `chain ceiling, a block every ${seconds} s`,
        'registrations/day',
        Math.floor((capacity.callsPerBlock * DAY_S) / seconds),
      );
    }
    report.note(
      'the whole normal class of every block, for the service alone: other users of the chain, and the operational class, are not counted',
    );
    report.note(
      "the remark dialect on the local runtime; the ats dialect's createOnBehalf weight is the ATS pallet's own and is not measured here",
    );
    report.write(options.outDir);
  } finally {
    await api.disconnect();
    await chain.stop();
  }
});
