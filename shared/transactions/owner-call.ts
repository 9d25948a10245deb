import type { TransactionDeps } from './outcomes';
import type { AnchorService } from '../chain/anchors';
import { withWalletSeed } from '../organizations/service';
import { PROTOCOL_VERSION } from '../registration/commitment';
import type { TransactionRow } from './repo';

export interface OwnerCallDeps {
  readonly app: TransactionDeps;
  readonly anchors: AnchorService;
}

/** The transaction's call, owner signature inside (`ats`: over `ownerNonce`, else the chain's current one). */
export async function buildOwnerCall({ app, anchors }: OwnerCallDeps, tx: TransactionRow, ownerNonce?: bigint): Promise<string> {
  return withWalletSeed(app, tx.organizationId, tx.network, (ownerSeed) =>
    anchors.buildCall(tx.network, {
      action: tx.type === 'register' ? 'register' : 'update',
      network: tx.network,
      protocolVersion: PROTOCOL_VERSION,
      atsId: BigInt(tx.atsId ?? 0),
      version: tx.version ?? 1,
      commitment: Buffer.from(tx.anchor.commitment.slice(2), 'hex'),
      ownerSeed,
      ...(ownerNonce !== undefined ? { ownerNonce } : {}),
    }),
  );
}
