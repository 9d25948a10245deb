import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { isIP, type LookupFunction } from 'node:net';
import { forbiddenAddressKind } from './address-policy';

export interface DestinationPolicy {
  /** ALLOW_HTTP_WEBHOOKS: accept http:// besides https://. */
  readonly allowHttp: boolean;
  /** WEBHOOK_ALLOW_PRIVATE: skip the address check (development and tests). */
  readonly allowPrivate: boolean;
}

/** A webhook URL that passed the policy, with the addresses its host resolved to when it was checked. */
export interface VettedDestination {
  readonly url: URL;
  readonly addresses: readonly LookupAddress[];
}

/** The URL may never be delivered to as configured: a permanent failure, not worth retrying. */
export class RefusedDestination extends Error {
  override readonly name = 'RefusedDestination';
}

export type Resolver = (hostname: string) => Promise<LookupAddress[]>;

/** The system resolver (getaddrinfo), every address. */
export const resolveAll: Resolver = (hostname) =>
  new Promise((resolve, reject) =>
    dnsLookup(hostname, { all: true, verbatim: true }, (err, addresses) => (err ? reject(err) : resolve(addresses))),
  );

/**
 * Checks a webhook URL at delivery time (SSRF): the scheme, then every address its host resolves to. A host
 * with any forbidden address is refused outright. Resolution failures are thrown as they are (retryable).
 */
export async function vetDestination(
  rawUrl: string,
  policy: DestinationPolicy,
  resolve: Resolver = resolveAll,
): Promise<VettedDestination> {
  let url: URL;
  try {
    url = new URL(rawUrl);
  } catch {
    throw new RefusedDestination('the webhook URL is not a valid URL');
  }
  if (url.protocol !== 'https:' && !(url.protocol === 'http:' && policy.allowHttp)) {
    throw new RefusedDestination(
      policy.allowHttp ? 'the webhook URL must use http or https' : 'the webhook URL must use https (ALLOW_HTTP_WEBHOOKS is off)',
    );
  }
  const host = url.hostname.replace(/^\[|\]$/g, '');
  const addresses = isIP(host) ? [{ address: host, family: isIP(host) }] : await resolve(host);
  if (addresses.length === 0) throw new Error(`${host} resolved to no address`);
  const refused = refusedAddress(policy, addresses);
  if (refused)
    throw new RefusedDestination(
      `refused: ${host} resolves to ${refused.address}, a ${refused.kind} address (private addresses are not allowed)`,
    );
  return { url, addresses };
}

/** The first of these addresses the policy refuses, with why; undefined when it allows them all. */
export function refusedAddress(
  policy: Pick<DestinationPolicy, 'allowPrivate'>,
  addresses: readonly Pick<LookupAddress, 'address'>[],
): { address: string; kind: string } | undefined {
  if (policy.allowPrivate) return undefined;
  for (const { address } of addresses) {
    const kind = forbiddenAddressKind(address);
    if (kind) return { address, kind };
  }
  return undefined;
}

/**
 * A `lookup` for the request that answers with the addresses already vetted, so the connection goes where
 * the check looked: a DNS answer that changes between check and connect (rebinding) is never consulted.
 */
export function pinnedLookup(addresses: readonly LookupAddress[]): LookupFunction {
  return (_hostname, options, callback) => {
    const family = options.family === 4 || options.family === 'IPv4' ? 4 : options.family === 6 || options.family === 'IPv6' ? 6 : 0;
    const usable = family ? addresses.filter((a) => a.family === family) : [...addresses];
    if (usable.length === 0) {
      const err = Object.assign(new Error(`no vetted IPv${family} address`), { code: 'ENOTFOUND' });
      return options.all ? callback(err, []) : callback(err, '', 0);
    }
    if (options.all) callback(null, usable);
    else callback(null, usable[0]!.address, usable[0]!.family);
  };
}
