import type { PreparedQuote } from '../../../shared/registration/types';

/** The quote (docs/api.md#quotes-and-pricing): registration quotes carry work_id and total_deposit_credits. */
export function presentRegistrationQuote(quote: PreparedQuote) {
  return {
    job_id: quote.session.jobId,
    work_id: quote.session.jobId,
    commitment: quote.commitment,
    network_fee_credits: quote.price.network_fee_credits,
    total_deposit_credits: quote.price.deposit_credits,
    ...commonLines(quote),
  };
}

/** A version quote (docs/api.md#versions-prepare-and-confirm): version_deposit_credits instead of total_deposit_credits, and no work_id. */
export function presentVersionQuote(quote: PreparedQuote) {
  return {
    job_id: quote.session.jobId,
    commitment: quote.commitment,
    version_deposit_credits: quote.price.deposit_credits,
    network_fee_credits: quote.price.network_fee_credits,
    ...commonLines(quote),
  };
}

function commonLines(quote: PreparedQuote) {
  return {
    service_fee_credits: quote.price.service_fee_credits,
    storage_fee_credits: quote.price.storage_fee_credits,
    total_price_credits: quote.price.total_price_credits,
    is_valid: quote.isValid,
    ...(quote.error ? { error: quote.error } : {}),
    expires_at: quote.expiresAt,
  };
}
