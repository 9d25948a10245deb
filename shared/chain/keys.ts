import { cryptoWaitReady, encodeAddress, sr25519PairFromSeed } from '@polkadot/util-crypto';
import { u8aToHex } from '@polkadot/util';
import { randomBytes } from 'node:crypto';
import { Keyring } from '@polkadot/keyring';

export interface GeneratedKeypair {
  /** 32-byte sr25519 mini-secret: the only thing that must be kept secret. */
  readonly seed: Buffer;
  readonly publicKey: string;
  readonly address: string;
}

/** A fresh sr25519 keypair; the address is ss58 with the network's prefix. */
export async function generateSr25519(ss58Prefix: number): Promise<GeneratedKeypair> {
  await cryptoWaitReady();
  const seed = randomBytes(32);
  const pair = sr25519PairFromSeed(seed);
  return { seed, publicKey: u8aToHex(pair.publicKey), address: encodeAddress(pair.publicKey, ss58Prefix) };
}

/** The ss58 address of a relayer seed (a mnemonic, a 0x seed, or a dev URI such as //Relayer). */
export async function relayerAddress(seed: string, ss58Prefix = 42): Promise<string> {
  await cryptoWaitReady();
  return new Keyring({ type: 'sr25519', ss58Format: ss58Prefix }).addFromUri(seed).address;
}
