import type { Gauge } from 'prom-client';
import type { Logger } from '../shared/logger';
import type { Config } from '../shared/config';
import { checkReadiness, type ReadinessReport } from '../shared/readiness';

/** What a failing check of a production web tells whoever asks `/readyz`: the reason is in the process's log. */
export const REASON_LOGGED = 'failing (the reason is in the web process log)';

type Checked = Parameters<typeof checkReadiness>[0];

/** How often a failing check's new reason is logged at most (a reason can name a rotating address). */
export const REASON_CHANGE_LOG_MS = 60_000;

/**
 * `/readyz` for one web app. Its answer is open (a load balancer asks without a credential), so a production
 * web names only which checks fail: their reasons (a host and port, a Redis server's memory settings, a driver's
 * words) go to the log, when a check starts failing, when its reason changes (at most once a minute: a reason
 * can name an address that rotates) and when it passes again. Every report also sets
 * `works_api_readiness_check_ok` (1 or 0 per check) for operators' alerts. Requests that arrive while the
 * dependencies are being asked share that one report, so the open endpoint asks them once at a time however
 * often it is called, and reports are noted in the order they were made. Outside production the reasons stay
 * in the answer, as a developer wants them.
 */
export class ReadinessWatch {
  /** Each failing check's latest reason, and when a reason of it was last logged (a passing check is absent). */
  private readonly failing = new Map<string, { reason: string; loggedAt: number }>();
  private running: Promise<ReadinessReport> | undefined;

  constructor(private readonly deps: { readonly log: Logger; readonly gauge: Gauge<'check'>; readonly env: Config['env'] }) {}

  async report(app: Checked): Promise<ReadinessReport> {
    const report = await (this.running ??= this.check(app).finally(() => (this.running = undefined)));
    if (this.deps.env !== 'production') return report;
    const checks = Object.fromEntries(
      Object.entries(report.checks).map(([check, result]) => [check, result.ok ? result : { ok: false, error: REASON_LOGGED }]),
    );
    return { ready: report.ready, checks };
  }

  private async check(app: Checked): Promise<ReadinessReport> {
    const report = await checkReadiness(app);
    for (const [check, { ok, error }] of Object.entries(report.checks)) this.note(check, ok ? undefined : (error ?? 'failing'));
    return report;
  }

  private note(check: string, reason: string | undefined): void {
    this.deps.gauge.set({ check }, reason === undefined ? 1 : 0);
    const before = this.failing.get(check);
    const now = Date.now();
    if (reason === undefined) {
      if (!before) return;
      this.failing.delete(check);
      this.deps.log.info({ check, was: before.reason }, 'readiness check passing again');
    } else if (!before) {
      this.failing.set(check, { reason, loggedAt: now });
      this.deps.log.warn({ check, reason }, 'readiness check failing: /readyz answers 503');
    } else if (reason !== before.reason) {
      const due = now - before.loggedAt >= REASON_CHANGE_LOG_MS;
      this.failing.set(check, { reason, loggedAt: due ? now : before.loggedAt });
      if (due) this.deps.log.warn({ check, reason, was: before.reason }, 'readiness check still failing, for another reason');
    }
  }
}
