/** An amount of the chain's native token: exact in planck, and in token units for metrics (a float). */
export interface TokenAmount {
  readonly planck: bigint;
  readonly tokens: number;
}

/** The amount in token units (planck / 10^decimals), as close as a float gets: whole and fractional parts apart. */
export function tokenAmount(planck: bigint, decimals: number): TokenAmount {
  const unit = 10n ** BigInt(decimals);
  return { planck, tokens: Number(planck / unit) + Number(planck % unit) / Number(unit) };
}

/** The runtime's native token decimals (12 when it does not say). */
export const nativeDecimals = (api: { registry: { chainDecimals: number[] } }): number => api.registry.chainDecimals[0] ?? 12;
