import type { Config } from '../config';
import type { PriceLines } from './types';

const MB = 1024 * 1024;

/**
 * Prices a quote in whole credits: the network fee converted at CREDITS_PER_TOKEN and rounded up, a fixed
 * service fee, storage free up to STORAGE_FREE_BYTES then per started MB, and the deposit. The total is
 * the sum of every line, deposit included (docs/api.md#quotes-and-pricing).
 */
export function priceQuote(
  pricing: Config['pricing'],
  input: { feePlanck: bigint; decimals: number; audioBytes: number; kind: 'register' | 'add_version' },
): PriceLines {
  const unit = 10n ** BigInt(input.decimals);
  const scaled = input.feePlanck * BigInt(pricing.creditsPerToken);
  const network = Number((scaled + unit - 1n) / unit);
  const billable = Math.max(0, input.audioBytes - pricing.storageFreeBytes);
  const storage = Math.ceil(billable / MB) * pricing.storageCreditsPerMb;
  const deposit = input.kind === 'register' ? pricing.registrationDepositCredits : pricing.versionDepositCredits;
  const service = pricing.serviceFeeCredits;
  return {
    network_fee_credits: network,
    deposit_credits: deposit,
    service_fee_credits: service,
    storage_fee_credits: storage,
    total_price_credits: network + deposit + service + storage,
  };
}
