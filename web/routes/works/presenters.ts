import type { PreparedQuote } from '../../../shared/registration/types';

/** The quote of spec 2.3: registration quotes carry work_id and total_deposit_credits. */
export function presentRegistrationQuote(quote: PreparedQuote) {
  const { deposit_credits, ...lines } = quote.price;
  return {
    job_id: quote.session.jobId,
    work_id: quote.session.jobId,
    commitment: quote.commitment,
    network_fee_credits: lines.network_fee_credits,
    total_deposit_credits: deposit_credits,
    service_fee_credits: lines.service_fee_credits,
    storage_fee_credits: lines.storage_fee_credits,
    total_price_credits: lines.total_price_credits,
    is_valid: quote.isValid,
    ...(quote.error ? { error: quote.error } : {}),
    expires_at: quote.expiresAt,
  };
}
