/**
 * @works-api/client: a typed client for works-api (registration, versions, the read side, tracking, sessions,
 * API keys) with retries done right (contract §1, §4, §9).
 */
export { createClient, type ClientOptions, type WorksClient } from './client';
export { WorksApiError, type ClientErrorCode, type ErrorCode, type ErrorDetail } from './errors';
export type { RetryOptions, Safety } from './retry';
export type { WaitOptions, WebSocketConstructor, WebSocketLike } from './transactions';
export type { Audio, Confirmed, UploadOptions, WorkListing, WorkLookup, WorksApi, WriteOptions } from './works';
export type { TransactionsApi } from './transactions';
export type * from './types';
export type { paths, components, operations, webhooks } from './generated/openapi';
// TODO(issue 23, after merging branch sdk-verify): export verifyWebhook (./webhooks), computeCommitment
// (./commitment) and verifyAnchor (./anchor) here.
