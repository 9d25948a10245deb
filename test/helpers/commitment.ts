import { createHash } from 'node:crypto';

/** An independent implementation of docs/api.md#the-commitment, written from its text, for the commitment check. */
export function referenceCommitment(audio: Buffer, title: string, creators: Record<string, any>[]): string {
  const h = (...b: Buffer[]) => createHash('sha256').update(Buffer.concat(b)).digest();
  const str = (s: string) => {
    const b = Buffer.from(s, 'utf8');
    const n = Buffer.alloc(4);
    n.writeUInt32LE(b.length, 0);
    return Buffer.concat([n, b]);
  };
  const opt = (s?: string) => (s === undefined ? Buffer.from([0]) : Buffer.concat([Buffer.from([1]), str(s)]));
  const tags = (r: Record<string, boolean>) => {
    const t = (['author', 'composer', 'arranger', 'adapter'] as const).map((k, i) => (r[k] ? i : -1)).filter((i) => i >= 0);
    return Buffer.from([t.length, ...t]);
  };
  let level = creators.map((c) => h(str(c.full_name), str(c.email ?? ''), tags(c.roles), opt(c.ipi), opt(c.isni)));
  while (level.length < 32) level.push(h(Buffer.from([0])));
  while (level.length > 1) level = Array.from({ length: level.length / 2 }, (_, i) => h(level[2 * i]!, level[2 * i + 1]!));
  return '0x' + h(Buffer.from([1]), h(audio), str(title.trim()), level[0]!).toString('hex');
}
