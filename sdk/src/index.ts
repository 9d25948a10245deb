/**
 * @works-api/client: a typed client for works-api (registration, versions, the read side, tracking, sessions,
 * API keys) with retries done right (docs/api.md#errors, docs/api.md#idempotency, docs/api.md#rate-limits).
 */
export { createClient, type ClientOptions, type WorksClient } from './client';
export { WorksApiError, RegistrationError, type RegistrationStage, type ClientErrorCode, type ErrorCode, type ErrorDetail } from './errors';
export type { RetryOptions, Safety } from './retry';
export type { WaitOptions, WebSocketConstructor, WebSocketLike } from './transactions';
export type { Audio, Confirmed, UploadOptions, WorkListing, WorkLookup, WorksApi, WriteOptions } from './works';
export type { TransactionsApi } from './transactions';
export type * from './types';
export type { paths, components, operations, webhooks } from './generated/openapi';
// Trust nothing: check a webhook's signature, recompute a commitment, check an anchor on chain (docs/api.md#the-commitment, docs/api.md#headers-and-signature).
export {
  verifyWebhook,
  WebhookVerificationError,
  type WebhookEvent,
  type WebhookEventType,
  type WebhookHeaders,
  type VerifyWebhookOptions,
  type WebhookVerificationFailure,
} from './webhooks';
export { computeCommitment, type Commitment, type AudioSource, type CreatorRoles } from './commitment';
export {
  verifyAnchor,
  decodeRemarkAnchor,
  AnchorVerificationError,
  type RemarkAnchor,
  type VerifiedAnchor,
  type AnchorExpectation,
  type AnchorVerificationFailure,
  type Sr25519Verify,
} from './anchor';
