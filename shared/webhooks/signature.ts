import { createHmac } from 'node:crypto';

/**
 * docs/api.md#headers-and-signature: `v1` is the hex HMAC-SHA256, keyed with the base64-decoded webhook secret, of `<t>.<raw body>`.
 * Header: `X-Service-Signature: t=<unix>,v1=<hex>`.
 */
export function signWebhook(secret: Buffer, body: string, timestamp: number): string {
  const v1 = createHmac('sha256', secret).update(`${timestamp}.${body}`).digest('hex');
  return `t=${timestamp},v1=${v1}`;
}
