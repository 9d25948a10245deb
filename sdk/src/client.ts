import type { RetryOptions } from './retry';
import { createTransport } from './transport';
import { transactionsApi, type TransactionsApi, type WebSocketConstructor } from './transactions';
import { worksApi, type WorksApi } from './works';
import type { ApiKey, CreatedApiKey, NewApiKey, Session } from './types';

export interface ClientOptions {
  /** The service's base URL, e.g. `https://works.example.com`. */
  readonly baseUrl: string;
  /**
   * The bearer token: an API key (`wrk_live_…`), an end-user session token (`wrs_…`, read-only), or for
   * `apiKeys` an administrator's identity token.
   */
  readonly token: string;
  /** A fetch to use instead of the global one. */
  readonly fetch?: typeof globalThis.fetch;
  /** The retry policy (`false`: one attempt only); see `RetryOptions` and `Safety`. */
  readonly retry?: RetryOptions | false;
  /**
   * A WebSocket constructor for `transactions.wait` (the `ws` package's on Node 20); without one, it polls.
   */
  readonly WebSocket?: WebSocketConstructor;
}

/** The typed client: one method per operation of the API, grouped as the API groups them. */
export interface WorksClient {
  readonly works: WorksApi;
  readonly transactions: TransactionsApi;
  readonly sessions: {
    /** A one-hour read-only session token bound to an end-user ref (an API key with `works:read`; docs/api.md#sessions). */
    create(externalUserRef: string): Promise<Session>;
  };
  /** Key management (docs/api.md#api-key-management): the client's token must be an administrator's identity token for the organization. */
  readonly apiKeys: {
    /** Creates a key; its `token` and `webhook_secret` are shown this once. Not retried once sent (a second key). */
    create(organizationId: string, key: NewApiKey): Promise<CreatedApiKey>;
    list(organizationId: string): Promise<ApiKey[]>;
    /** Revokes a key, at once everywhere (also when already revoked). */
    revoke(organizationId: string, apiKeyId: string): Promise<void>;
  };
}

/** Makes a client. No request is sent until a method is called. */
export function createClient(options: ClientOptions): WorksClient {
  const t = createTransport(options);
  const { api } = t;
  const org = (organizationId: string) => ({ path: { organization_id: organizationId } });
  return {
    works: worksApi(t),
    transactions: transactionsApi(t, options.WebSocket),
    sessions: {
      create: (externalUserRef) =>
        t.call('repeatable', () => api.POST('/v1/sessions', { body: { external_user_ref: externalUserRef } }), { write: true }),
    },
    apiKeys: {
      create: (organizationId, key) =>
        t.call('once', () => api.POST('/v1/organizations/{organization_id}/api-keys', { params: org(organizationId), body: key }), {
          write: true,
        }),
      list: async (organizationId) =>
        (await t.call('repeatable', () => api.GET('/v1/organizations/{organization_id}/api-keys', { params: org(organizationId) })))
          .api_keys,
      revoke: async (organizationId, apiKeyId) => {
        await t.call(
          'repeatable',
          () =>
            api.DELETE('/v1/organizations/{organization_id}/api-keys/{api_key_id}', {
              params: { path: { organization_id: organizationId, api_key_id: apiKeyId } },
            }),
          { write: true },
        );
      },
    },
  };
}
