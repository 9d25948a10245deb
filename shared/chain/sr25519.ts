import { isReady, sr25519KeypairFromSeed, sr25519Sign } from '@polkadot/wasm-crypto';

/**
 * sr25519 with an owner's 32-byte seed (mini-secret, expanded as everywhere in Substrate), in schnorrkel's
 * WebAssembly build: @polkadot/util-crypto's own sr25519 is JavaScript, whose key pair and signature cost
 * about 1.4 ms of CPU per anchor against 0.26 ms here. The WebAssembly is initialised by `cryptoWaitReady()`,
 * which every ApiPromise awaits before it is ready, so any process holding a chain connection has it.
 */
export function withSeedKeypair<T>(seed: Uint8Array, use: (publicKey: Buffer, sign: (message: Uint8Array) => Buffer) => T): T {
  if (!isReady()) throw new Error('sr25519 needs @polkadot/util-crypto initialised: await cryptoWaitReady() first');
  const pair = sr25519KeypairFromSeed(seed);
  try {
    const publicKey = Buffer.from(pair.subarray(64));
    return use(publicKey, (message) => Buffer.from(sr25519Sign(publicKey, pair.subarray(0, 64), message)));
  } finally {
    pair.fill(0); // our copy of the expanded secret; the WebAssembly's own lingers in its freed memory, as util-crypto's did in the heap
  }
}

/** The seed's public key (its AccountId32). */
export const publicKeyOf = (seed: Uint8Array): Buffer => withSeedKeypair(seed, (publicKey) => publicKey);
