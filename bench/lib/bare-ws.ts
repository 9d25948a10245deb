import { WebSocketServer } from 'ws';

/**
 * The sockets bench's floor: a bare `ws` server in a process of its own that sends each new socket one small
 * frame and keeps it, nothing else (no authentication, no Redis fan-out, no heartbeat). Answers memory after
 * a full collection on `measure`, like web-process.ts.
 */
const server = new WebSocketServer({ host: '127.0.0.1', port: 0, perMessageDeflate: false });
server.on('connection', (ws) => ws.send(JSON.stringify({ type: 'connected', transaction: { status: 'pending' } })));
server.on('listening', () => process.send!({ type: 'listening', url: `ws://127.0.0.1:${(server.address() as { port: number }).port}` }));
process.on('message', (message: { type: string }) => {
  if (message.type === 'measure') {
    for (let i = 0; i < 3; i++) global.gc?.();
    process.send!({ type: 'memory', memory: { ...process.memoryUsage(), sockets: server.clients.size } });
  } else if (message.type === 'stop') process.exit(0);
});
