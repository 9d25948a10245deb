import { loadConfig, processEnv } from '../../shared/config';
import { createLogger } from '../../shared/logger';
import { startWeb } from '../../web/main';

/**
 * A web process as `npm run web` starts it (forked by processes.ts), answering over IPC: its URL once
 * listening, memory after a full collection on `measure`, and a clean stop (which writes a CPU profile when
 * started with --cpu-prof).
 */
async function main(): Promise<void> {
  const config = loadConfig(processEnv());
  const web = await startWeb(config, createLogger(config.log.level));
  process.on('message', async (message: { type: string }) => {
    if (message.type === 'measure') {
      for (let i = 0; i < 3; i++) global.gc?.();
      process.send!({ type: 'memory', memory: { ...process.memoryUsage(), sockets: web.live.connections.size } });
    } else if (message.type === 'stop') {
      await web.stop().catch(() => undefined);
      process.exit(0);
    }
  });
  process.send!({ type: 'listening', url: web.url });
}

main().catch((err) => {
  process.stderr.write(`${(err as Error).stack}\n`);
  process.exit(1);
});
