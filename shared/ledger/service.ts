import type { Knex } from 'knex';
import { AppError } from '../errors';
import { insertRow, PG, pgCode } from '../db/knex';
import { creditBalance } from '../organizations/repo';

export type LedgerKind = 'grant' | 'debit' | 'refund' | 'adjustment';

export interface LedgerEntryInput {
  readonly organizationId: string;
  readonly kind: LedgerKind;
  /** Signed: negative for debits. */
  readonly amount: number;
  /** What the entry pays for (a transaction id). At most one entry per (organization, kind, reference). */
  readonly reference?: string;
  /**
   * The reference was made in the same SQL transaction as this entry (a transaction id just inserted): no earlier
   * entry can carry it, so it is not looked for first (the unique index still refuses a second one).
   */
  readonly newReference?: boolean;
  readonly reason?: string;
}

export interface LedgerResult {
  readonly applied: boolean;
  readonly balance: number;
}

/**
 * Appends one ledger row; the database moves the balance in the same statement and refuses an overdraft.
 * Must run inside the caller's transaction when it pays for something written alongside it.
 * A repeated entry for the same reference is not applied again.
 */
export async function appendLedgerEntry(trx: Knex | Knex.Transaction, entry: LedgerEntryInput): Promise<LedgerResult> {
  if (entry.reference && !entry.newReference) {
    const existing = await trx('credit_ledger')
      .where({ organization_id: entry.organizationId, kind: entry.kind, reference: entry.reference })
      .first('id');
    if (existing) return { applied: false, balance: await balanceOf(trx, entry.organizationId) };
  }
  try {
    // every debit and refund: a prepared statement (db/knex.ts `insertRow`), not knex's builder
    const [row] = await insertRow(
      trx,
      'credit_ledger',
      {
        organization_id: entry.organizationId,
        kind: entry.kind,
        amount: entry.amount,
        balance_after: 0, // set by the credit_ledger_apply trigger
        reference: entry.reference ?? null,
        reason: entry.reason ?? null,
      },
      'balance_after',
    );
    return { applied: true, balance: Number(row.balance_after) };
  } catch (err) {
    if (pgCode(err) === PG.checkViolation) {
      throw new AppError('credits.insufficient', 'The organization does not have enough credits');
    }
    throw err;
  }
}

/** The balance the ledger's entries add up to (kept on the organization's row by the ledger's trigger). */
export const balanceOf = creditBalance;

/** A ledger row as support staff read it. */
export interface LedgerEntry {
  readonly id: string;
  readonly kind: LedgerKind;
  readonly amount: number;
  readonly balanceAfter: number;
  readonly reason: string | null;
  readonly createdAt: Date;
}

/** The debit and refund paying for `reference` (a transaction id), oldest first: the (organization, kind, reference) index. */
export async function entriesFor(db: Knex, organizationId: string, reference: string): Promise<LedgerEntry[]> {
  const rows = await db('credit_ledger')
    .where({ organization_id: organizationId, reference })
    .whereIn('kind', ['debit', 'refund'] satisfies LedgerKind[])
    .orderBy('id');
  return rows.map((r) => ({
    id: String(r.id),
    kind: r.kind,
    amount: Number(r.amount),
    balanceAfter: Number(r.balance_after),
    reason: r.reason,
    createdAt: r.created_at,
  }));
}

/** The credits the organization was debited and refunded since `since`, as positive totals. */
export async function creditsMovedSince(db: Knex, organizationId: string, since: Date): Promise<{ debited: number; refunded: number }> {
  const rows: { kind: LedgerKind; total: string }[] = await db('credit_ledger')
    .where({ organization_id: organizationId })
    .where('created_at', '>=', since)
    .whereIn('kind', ['debit', 'refund'] satisfies LedgerKind[])
    .groupBy('kind')
    .select('kind', db.raw('sum(amount) AS total'));
  const total = (kind: LedgerKind) => Math.abs(Number(rows.find((r) => r.kind === kind)?.total ?? 0));
  return { debited: total('debit'), refunded: total('refund') };
}
