import http from 'node:http';

/**
 * The webhooks bench's floor, in a process of its own like the worker: COUNT POSTs of the same body to the
 * receiver, CONCURRENCY at a time, over connections kept alive for `keepAliveMs` as the workers keep them (a
 * fresh connection per POST when 0), and nothing else (no database, no queue, no signature). Answers { ms,
 * cpuMs }: the time they took, and the CPU this process spent sending them (the floor's sender side, beside the
 * worker's CPU per delivery).
 */
process.on('message', async (m: { url: string; count: number; concurrency: number; body: string; keepAliveMs?: number }) => {
  const agent = m.keepAliveMs ? new http.Agent({ keepAlive: true, timeout: m.keepAliveMs }) : false;
  const started = process.hrtime.bigint();
  const cpu = process.cpuUsage();
  let next = 0;
  const post = () =>
    new Promise<void>((resolve, reject) => {
      const req = http.request(
        m.url,
        { method: 'POST', agent, headers: { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(m.body) } },
        (res) => {
          res.resume();
          res.on('end', () => (res.statusCode === 200 ? resolve() : reject(new Error(`HTTP ${res.statusCode}`))));
        },
      );
      req.on('error', reject);
      req.end(m.body);
    });
  await Promise.all(
    Array.from({ length: m.concurrency }, async () => {
      while (next++ < m.count) await post();
    }),
  );
  const ms = Number(process.hrtime.bigint() - started) / 1e6;
  const spent = process.cpuUsage(cpu);
  if (agent) agent.destroy();
  process.send!({ ms, cpuMs: (spent.user + spent.system) / 1000 });
});
process.send!({ ready: true });
