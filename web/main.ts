import '../shared/telemetry/register-web';
import type http from 'node:http';
import { loadConfigOrExit, type Config } from '../shared/config';
import { createLogger, type Logger } from '../shared/logger';
import { openResources } from '../shared/resources';
import { createWebApp } from './app';
import { attachLiveTracking, type LiveTracking } from './ws';
import { createHttpServer } from './http-server';
import { HttpDrain } from './drain';
import { stopTracing } from '../shared/telemetry/start';
import { checkRedisAtStart } from '../shared/redis/eviction';

export interface RunningWeb {
  readonly server: http.Server;
  readonly url: string;
  readonly live: LiveTracking;
  stop(): Promise<void>;
}

/**
 * Starts the web process: HTTP on PORT with live tracking (WebSocket, socket.io) on the same server. `stop()`
 * cuts nothing: not ready (/readyz 503) for SHUTDOWN_DRAIN_MS while still serving, then no longer accepting,
 * every accepted request answered and live sockets told to reconnect, then the resources closed; requests
 * still unanswered SHUTDOWN_TIMEOUT_MS after the stop began are cut (web/drain.ts).
 */
export async function startWeb(config: Config, log: Logger): Promise<RunningWeb> {
  // in production, not on a Redis that may drop keys (a revoked key's marker, jobs, idempotency records)
  await checkRedisAtStart(config, log.child({ process: 'web' }));
  const context = openResources(config, log.child({ process: 'web' }), 'web');
  const drain = new HttpDrain(context.log);
  const app = createWebApp(context, { lifecycle: drain });
  const server = createHttpServer(app.callback());
  const live = attachLiveTracking(server, context);
  drain.watch(server);
  await new Promise<void>((resolve) => server.listen(config.http.port, config.http.host, resolve));
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : config.http.port;
  const host = config.http.host === '0.0.0.0' ? '127.0.0.1' : config.http.host;
  return {
    server,
    url: `http://${host}:${port}`,
    live,
    async stop() {
      const deadline = Date.now() + config.shutdown.timeoutMs;
      drain.begin();
      context.log.info({ drain_ms: config.shutdown.drainMs }, 'web draining: /readyz answers 503, requests still served');
      await new Promise((resolve) => setTimeout(resolve, config.shutdown.drainMs));
      context.log.info('web no longer accepting: answering the requests in flight');
      await Promise.all([drain.close(deadline), live.close()]);
      await context.close();
    },
  };
}

if (require.main === module) {
  const config = loadConfigOrExit();
  const log = createLogger(config.log.level);
  startWeb(config, log).then(
    (web) => {
      let stopping = false;
      const shutdown = (signal: string) => {
        if (stopping) return;
        stopping = true;
        log.info({ signal }, 'web shutting down');
        // the last resort should closing a resource hang past the shutdown limit
        setTimeout(() => process.exit(1), config.shutdown.timeoutMs + 5000).unref();
        web.stop().then(
          () => stopTracing().then(() => process.exit(0)),
          () => stopTracing().then(() => process.exit(1)),
        );
      };
      process.once('SIGTERM', shutdown);
      process.once('SIGINT', shutdown);
      // said once the signals are handled: a platform may send SIGTERM the instant it reads this line
      log.info({ url: web.url }, 'web listening');
    },
    (err) => {
      log.fatal({ err }, 'web failed to start');
      process.exit(1);
    },
  );
}
