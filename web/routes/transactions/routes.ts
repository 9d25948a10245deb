import { getTransaction } from '../../../shared/transactions/service';
import { defineRoute, type Route, type ServedElsewhere } from '../../http/route';
import * as C from '../../openapi/components';

/** REST polling of a transaction (docs/api.md#polling): any key of the owning organization, or its ref's session. */
export const getTransactionRoute: Route = defineRoute({
  method: 'get',
  path: '/v1/transactions/{transaction_id}',
  id: 'getTransaction',
  summary: 'A transaction’s status, steps and result',
  docs: 'polling',
  tag: 'Transactions',
  security: 'apiKeyOrSession',
  responses: { 200: { description: 'The transaction', schema: C.Transaction } },
  errors: ['common.not_found'],
  handler: async (ctx, { caller, params }, { app }) => {
    ctx.body = await getTransaction(app.db, caller, params.transaction_id);
  },
});

/** Live tracking: the same transaction over a socket. */
export const trackTransactionOperation: ServedElsewhere = {
  servedBy: 'the HTTP server’s upgrade handler (web/ws), authenticated by web/ws/authenticate.ts',
  method: 'get',
  path: '/v1/ws/transactions/{transaction_id}',
  id: 'trackTransaction',
  summary:
    'Live tracking: an RFC 6455 upgrade, authenticated before it is accepted (API key in Authorization, ' +
    'or a session token there or in ?access_token=). Frames { type: connected|update, transaction } carry this route’s REST body; ' +
    'closed with 1000 after completed or failed. socket.io clients use path /v1/socket.io and `subscribe`.',
  docs: 'websocket',
  tag: 'Transactions',
  security: 'apiKeyOrSession',
  responses: { 101: { description: 'Switching Protocols: the socket is open' } },
  errors: ['common.not_found', 'organization.rate_limited'],
};
