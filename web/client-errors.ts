import { randomUUID } from 'node:crypto';
import type http from 'node:http';
import type { Duplex } from 'node:stream';

/**
 * Requests Node's HTTP parser refuses before any route sees them (headers over the size limit, malformed
 * request lines) still get the error envelope, with a request id, instead of a bare status line.
 */
export function answerClientErrors(server: http.Server): void {
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Duplex) => {
    if (!socket.writable || (socket as Duplex & { _httpMessage?: unknown })._httpMessage) {
      socket.destroy();
      return;
    }
    const tooLarge = err.code === 'HPE_HEADER_OVERFLOW';
    const [status, reason, code, message] = tooLarge
      ? [431, 'Request Header Fields Too Large', 'common.headers_too_large', 'The request headers are too large']
      : [400, 'Bad Request', 'common.bad_request', 'The request could not be parsed as HTTP'];
    const requestId = randomUUID();
    const body = JSON.stringify({ error: { code, message, request_id: requestId } });
    socket.end(
      `HTTP/1.1 ${status} ${reason}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nX-Request-Id: ${requestId}\r\nConnection: close\r\n\r\n${body}`,
    );
  });
}
