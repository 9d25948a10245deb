import http from 'node:http';
import { answerClientErrors } from './client-errors';

/**
 * The web process's HTTP server, as tests run it too: its time limits, and the error envelope for requests
 * Node's parser refuses. An idle kept-alive connection is closed after `keepAliveTimeout` (advertised in the
 * `Keep-Alive` header, which Node keeps open a second longer than it says), so clients that honour the header
 * close it first.
 */
export function createHttpServer(listener: http.RequestListener): http.Server {
  const server = http.createServer(listener);
  answerClientErrors(server);
  server.headersTimeout = 15_000;
  server.requestTimeout = 60_000;
  server.keepAliveTimeout = 5_000;
  return server;
}
