/** The transaction status model of docs/api.md#transactions. */
export const STEPS = ['validating', 'preparing_transaction', 'signing', 'submitting', 'confirming', 'completed'] as const;
export type StepName = (typeof STEPS)[number] | 'failed';
export type TransactionStatus = 'pending' | 'submitted' | 'in_block' | 'finalized' | 'failed';

export const STEP_PROGRESS: Record<StepName, number> = {
  validating: 5,
  preparing_transaction: 20,
  signing: 40,
  submitting: 60,
  confirming: 80,
  completed: 100,
  failed: 100,
};

export interface Step {
  readonly name: StepName;
  readonly status: 'completed' | 'in_progress' | 'failed';
  readonly at: string;
}

/** The step list after entering `name`: earlier steps completed, this one in progress (or done at the end). */
export function enterStep(steps: readonly Step[], name: StepName, at = new Date()): Step[] {
  const iso = at.toISOString();
  const closed = steps.map((s) => (s.status === 'in_progress' ? { ...s, status: 'completed' as const, at: iso } : s));
  if (closed.some((s) => s.name === name)) return closed;
  const terminal = name === 'completed' || name === 'failed';
  return [...closed, { name, status: name === 'failed' ? 'failed' : terminal ? 'completed' : 'in_progress', at: iso }];
}
