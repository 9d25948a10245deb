import type http from 'node:http';
import type { Resources } from '../../shared/resources';
import { TransactionUpdatesHub } from './hub';
import { LiveConnections } from './connections';
import { transactionUpgrades } from './transaction-upgrades';
import { attachSocketIo, SOCKET_IO_PATH } from './socket-io';

export interface LiveTracking {
  readonly connections: LiveConnections;
  readonly hub: TransactionUpdatesHub;
  /**
   * Tells every live socket to reconnect (elsewhere, once this process stops accepting): plain sockets get
   * 1012, socket.io clients lose their transport and reconnect by themselves; then the subscriber connection.
   */
  close(): Promise<void>;
  /** engine.io sessions socket.io holds open on this process (each allocated by an accepted handshake). */
  socketIoSessions(): number;
}

/** How long a stopping process waits for clients to answer its close frames. */
const CLOSE_GRACE_MS = 2000;

/**
 * Live transaction tracking on the web's HTTP server: the plain WebSocket route and socket.io, both fed by
 * one Redis subscription per process (docs/api.md#websocket).
 */
export function attachLiveTracking(server: http.Server, app: Resources): LiveTracking {
  const hub = new TransactionUpdatesHub(app);
  const connections = new LiveConnections(app.config.live);
  const upgrades = transactionUpgrades({ app, hub, connections });
  const io = attachSocketIo(server, { app, hub, connections });
  server.on('upgrade', (req: http.IncomingMessage, socket, head: Buffer) => {
    if ((req.url ?? '').startsWith(`${SOCKET_IO_PATH}/`)) return; // engine.io's own upgrade listener
    upgrades.handle(req, socket, head);
  });
  return {
    connections,
    hub,
    socketIoSessions: () => io.engine.clientsCount,
    async close() {
      connections.shutdown();
      io.engine.close(); // the transports of handshakes not yet connected as sockets too
      const deadline = Date.now() + CLOSE_GRACE_MS;
      while (connections.size > 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
      connections.shutdown(); // whoever did not answer in time is cut off
      upgrades.close();
      hub.close();
    },
  };
}
