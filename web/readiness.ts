import type { Gauge } from 'prom-client';
import type { Logger } from '../shared/logger';
import type { Config } from '../shared/config';
import { checkReadiness, type ReadinessReport } from '../shared/readiness';

/** What a failing check of a production web tells whoever asks `/readyz`: the reason is in the process's log. */
export const REASON_LOGGED = 'failing (the reason is in the web process log)';

type Checked = Parameters<typeof checkReadiness>[0];

/**
 * `/readyz` for one web app. Its answer is open (a load balancer asks without a credential), so a production
 * web names only which checks fail: their reasons (a host and port, a Redis server's memory settings, a driver's
 * words) go to the log, once each time a check starts failing or fails for a new reason, and a recovery is logged
 * too. Every answer also sets `works_api_readiness_check_ok` (1 or 0 per check) for operators' alerts. Outside
 * production the reasons stay in the answer, as a developer wants them.
 */
export class ReadinessWatch {
  /** The reason each failing check last gave (a check passing, or never asked, is absent). */
  private readonly failing = new Map<string, string>();

  constructor(private readonly deps: { readonly log: Logger; readonly gauge: Gauge<'check'>; readonly env: Config['env'] }) {}

  async report(app: Checked): Promise<ReadinessReport> {
    const report = await checkReadiness(app);
    for (const [check, { ok, error }] of Object.entries(report.checks)) this.note(check, ok ? undefined : (error ?? 'failing'));
    if (this.deps.env !== 'production') return report;
    const checks = Object.fromEntries(
      Object.entries(report.checks).map(([check, result]) => [check, result.ok ? result : { ok: false, error: REASON_LOGGED }]),
    );
    return { ready: report.ready, checks };
  }

  private note(check: string, reason: string | undefined): void {
    this.deps.gauge.set({ check }, reason === undefined ? 1 : 0);
    const before = this.failing.get(check);
    if (reason === before) return;
    if (reason === undefined) {
      this.failing.delete(check);
      this.deps.log.info({ check, was: before }, 'readiness check passing again');
    } else {
      this.failing.set(check, reason);
      this.deps.log.warn({ check, reason }, 'readiness check failing: /readyz answers 503');
    }
  }
}
