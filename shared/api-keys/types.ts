export const SCOPES = ['works:register', 'works:update', 'works:read'] as const;
export type Scope = (typeof SCOPES)[number];

export interface ApiKey {
  readonly id: string;
  readonly organizationId: string;
  readonly name: string;
  readonly prefix: string;
  readonly scopes: readonly Scope[];
  readonly webhookUrl: string | null;
  readonly createdAt: Date;
  readonly lastUsedAt: Date | null;
  readonly revokedAt: Date | null;
}

/** Who is calling: an API key, or an end-user session issued by one (read-only, bound to a ref). */
export type Principal =
  | { readonly kind: 'api_key'; readonly apiKeyId: string; readonly organizationId: string; readonly scopes: readonly Scope[] }
  | {
      readonly kind: 'session';
      readonly apiKeyId: string;
      readonly organizationId: string;
      readonly externalUserRef: string;
      readonly scopes: readonly Scope[];
    };
