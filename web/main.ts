import http from 'node:http';
import { loadConfigOrExit, type Config } from '../shared/config';
import { createLogger, type Logger } from '../shared/logger';
import { openResources } from '../shared/resources';
import { createWebApp } from './app';
import { attachLiveTracking, type LiveTracking } from './ws';
import { answerClientErrors } from './client-errors';

export interface RunningWeb {
  readonly server: http.Server;
  readonly url: string;
  readonly live: LiveTracking;
  stop(): Promise<void>;
}

/**
 * Starts the web process: HTTP on PORT with live tracking (WebSocket, socket.io) on the same server; closes in
 * order on stop (live sockets, stop accepting, drain, close connections).
 */
export async function startWeb(config: Config, log: Logger): Promise<RunningWeb> {
  const context = openResources(config, log.child({ process: 'web' }), 'web');
  const app = createWebApp(context);
  const server = http.createServer(app.callback());
  answerClientErrors(server);
  const live = attachLiveTracking(server, context);
  server.headersTimeout = 15_000;
  server.requestTimeout = 60_000;
  server.keepAliveTimeout = 5_000;
  await new Promise<void>((resolve) => server.listen(config.http.port, config.http.host, resolve));
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : config.http.port;
  const host = config.http.host === '0.0.0.0' ? '127.0.0.1' : config.http.host;
  return {
    server,
    url: `http://${host}:${port}`,
    live,
    async stop() {
      await live.close();
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeIdleConnections();
      });
      await context.close();
    },
  };
}

if (require.main === module) {
  const config = loadConfigOrExit();
  const log = createLogger(config.log.level);
  startWeb(config, log).then(
    (web) => {
      log.info({ url: web.url }, 'web listening');
      const shutdown = (signal: string) => {
        log.info({ signal }, 'web shutting down');
        web.stop().then(
          () => process.exit(0),
          () => process.exit(1),
        );
      };
      process.once('SIGTERM', shutdown);
      process.once('SIGINT', shutdown);
    },
    (err) => {
      log.fatal({ err }, 'web failed to start');
      process.exit(1);
    },
  );
}
