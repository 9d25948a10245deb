import { isReady, sr25519KeypairFromSeed, sr25519Sign as wasmSign } from '@polkadot/wasm-crypto';
import { sr25519PairFromSeed, sr25519Sign } from '@polkadot/util-crypto';

/** An owner's sr25519 key, made from its wallet seed for one call. */
export interface OwnerSigner {
  readonly publicKey: Buffer;
  sign(message: Uint8Array): Buffer;
}

/**
 * The owner's key from its seed, in @polkadot/wasm-crypto's WebAssembly (schnorrkel, what util-crypto used
 * before version 13) once it is initialised, as it is from the first chain connection on; else in
 * util-crypto's JavaScript (@scure/sr25519). The JavaScript spends four elliptic-curve multiplications on a
 * key and a signature, about 4 ms of CPU: a quarter of the prepare worker's CPU per registration in its
 * profile. The WebAssembly gives the same public key and signatures that verify alike
 * (test/unit/owner-signer.test.ts). One signer keeps to the implementation that made its key.
 */
export function ownerSigner(seed: Uint8Array): OwnerSigner {
  if (isReady()) {
    const pair = sr25519KeypairFromSeed(seed);
    const secretKey = pair.subarray(0, 64);
    const publicKey = Buffer.from(pair.subarray(64));
    return { publicKey, sign: (message) => Buffer.from(wasmSign(publicKey, secretKey, message)) };
  }
  const pair = sr25519PairFromSeed(seed);
  return { publicKey: Buffer.from(pair.publicKey), sign: (message) => Buffer.from(sr25519Sign(message, pair)) };
}
