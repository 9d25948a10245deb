import type { Knex } from 'knex';
import { showOrganization } from '../organizations/service';
import { transactionCountsSince, transactionsSince } from '../transactions/repo';
import type { TransactionStatus } from '../transactions/steps';
import { creditsMovedSince } from '../ledger/service';

export interface ActivityOptions {
  readonly organizationId: string;
  readonly since: Date;
  /** At most this many transactions are listed; the summary counts them all. */
  readonly limit: number;
}

const STATUSES: readonly TransactionStatus[] = ['pending', 'submitted', 'in_block', 'finalized', 'failed'];

/**
 * An organization's registrations and versions since a moment, for support staff (the CLI's `org activity`):
 * newest first, each failed one with its reason, and a summary of the whole window (counts by status and type,
 * failures by reason, credits debited and refunded). One read-only snapshot, so the summary and the list agree.
 */
export async function organizationActivity(db: Knex, options: ActivityOptions) {
  const { organizationId, since, limit } = options;
  return db.transaction(
    async (trx) => {
      const organization = await showOrganization(trx, organizationId);
      const counts = await transactionCountsSince(trx, organizationId, since);
      const rows = await transactionsSince(trx, organizationId, since, limit);
      const credits = await creditsMovedSince(trx, organizationId, since);
      const tally = <K extends string>(keys: readonly K[], pick: (c: (typeof counts)[number]) => K | null) => {
        const out = Object.fromEntries(keys.map((k) => [k, 0])) as Record<K, number>;
        for (const c of counts) {
          const key = pick(c);
          if (key !== null) out[key] = (out[key] ?? 0) + c.count;
        }
        return out;
      };
      const total = counts.reduce((sum, c) => sum + c.count, 0);
      return {
        organization,
        since: since.toISOString(),
        summary: {
          transactions: total,
          by_status: tally(STATUSES, (c) => c.status),
          by_type: tally(['register', 'add_version'], (c) => c.type),
          failures: tally([], (c) => (c.status === 'failed' ? (c.reason ?? 'unknown') : null)),
          credits: { spent: credits.debited, refunded: credits.refunded },
        },
        transactions: rows.map((t) => ({
          id: t.id,
          type: t.type,
          network: t.network,
          status: t.status,
          current_step: t.currentStep,
          ats_id: t.atsId,
          version: t.version,
          external_user_ref: t.externalUserRef,
          created_at: t.createdAt.toISOString(),
          finalized_at: t.finalizedAt ? t.finalizedAt.toISOString() : null,
          error: t.status === 'failed' ? (t.result?.error ?? null) : null,
        })),
        limit,
        truncated: total > rows.length,
      };
    },
    { isolationLevel: 'repeatable read', readOnly: true },
  );
}
