/**
 * What support staff look a job up by in Bull Board, carried in the job's name (the line the board shows for
 * each job, found with the browser's search) and in its data: the organization, the transaction, the event (or
 * the transaction's type) and the webhook's host. Never more of a webhook URL than its host (its path, query
 * and user part may hold a partner's token), never a secret, nothing personal (creators, e-mails, titles).
 *
 * They are optional in every job's data: a job enqueued before they were carried has none, and is processed
 * the same, since processors read only its ids.
 */

/** A webhook delivery's labels (a delivery job's, a dead letter's). */
export interface DeliveryLabels {
  readonly organizationId: string;
  readonly transactionId: string;
  readonly event: string;
  readonly host: string;
}

/** A chain job's labels. */
export interface TransactionLabels {
  readonly transactionId: string;
  readonly organizationId: string;
  /** register or add_version. */
  readonly type: string;
  readonly network: string;
}

/** Of a webhook URL, its host (with the port, when one is given) and nothing else; `?` when it does not parse. */
export function webhookHost(url: string): string {
  return (URL.canParse(url) && new URL(url).host) || '?';
}

/** A job's name: its kind, then its labels as words (`org:<id> tx:<id> host:<host>`), ids in full. */
export function deliveryJobName(kind: string, labels: Partial<DeliveryLabels> | undefined): string {
  if (!labels) return kind;
  return words(
    kind,
    labels.event,
    labels.organizationId && `org:${labels.organizationId}`,
    labels.transactionId && `tx:${labels.transactionId}`,
    labels.host && `host:${labels.host}`,
  );
}

export function transactionJobName(labels: TransactionLabels): string {
  return words('transaction', labels.type, labels.network, `org:${labels.organizationId}`, `tx:${labels.transactionId}`);
}

const words = (...parts: (string | undefined)[]) => parts.filter(Boolean).join(' ');
