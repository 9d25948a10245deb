import type { TransactionView } from '../../shared/transactions/service';

/**
 * The frames one subscriber has been sent, reduced to what ordering needs. Updates reach a socket from two
 * sides (the state read when it connects, and the pub/sub messages that race with that read), so a state
 * that is older than the last one sent, or the same again, is dropped. Steps only ever grow, and a terminal
 * state ends the feed; status-only moves inside a step (a retracted block) pass through.
 */
export class TransactionFeed {
  private rank = -1;
  private signature = '';

  /** Whether `view` is news for this subscriber; records it when it is. */
  accept(view: TransactionView): boolean {
    if (this.rank === Number.POSITIVE_INFINITY) return false;
    const rank = view.is_complete ? Number.POSITIVE_INFINITY : view.steps.length;
    const signature = `${view.status}|${view.current_step}|${view.updated_at}`;
    if (rank < this.rank || signature === this.signature) return false;
    this.rank = rank;
    this.signature = signature;
    return true;
  }

  get ended(): boolean {
    return this.rank === Number.POSITIVE_INFINITY;
  }
}

export type FrameType = 'connected' | 'update' | 'error';

/** A frame of docs/api.md#websocket: `{ type, transaction }` with the REST body. */
export const frame = (type: FrameType, transaction: TransactionView | null, error?: { code: string; message: string }): string =>
  JSON.stringify(error ? { type, transaction, error } : { type, transaction });
