import { expect } from 'chai';
import { decodeCursor, encodeCursor } from '../../shared/works/cursor';
import { attachment } from '../../shared/works/downloads';

describe('listing cursors (docs/api.md#listing-and-cursors: opaque)', () => {
  const cursor = { createdAt: '2026-11-22T10:15:30.123456Z', id: '3f1c2a9e-5b7d-4e21-9c4a-8d2f6b1e0a37' };

  it('round-trips the microseconds and the id through an opaque URL-safe string', () => {
    const encoded = encodeCursor(cursor);
    expect(encoded).to.match(/^[A-Za-z0-9_-]+$/);
    expect(encoded).to.not.include(cursor.id);
    expect(decodeCursor(encoded)).to.deep.equal(cursor);
    expect(encoded).to.equal('dzF8MjAyNi0xMS0yMlQxMDoxNTozMC4xMjM0NTZafDNmMWMyYTllLTViN2QtNGUyMS05YzRhLThkMmY2YjFlMGEzNw');
  });

  it('refuses anything it did not issue with 400 common.bad_request', () => {
    const forged = (text: string) => Buffer.from(text).toString('base64url');
    for (const value of [
      '',
      '!!!',
      'a'.repeat(201),
      forged('w2|2026-11-22T10:15:30Z|3f1c2a9e-5b7d-4e21-9c4a-8d2f6b1e0a37'),
      forged('w1|yesterday|3f1c2a9e-5b7d-4e21-9c4a-8d2f6b1e0a37'),
      forged('w1|2026-11-22T10:15:30Z|x'),
      forged('w1|2026-13-45T10:15:30Z|3f1c2a9e-5b7d-4e21-9c4a-8d2f6b1e0a37'),
      forged(`w1|2026-11-22T10:15:30Z|${cursor.id}|extra`),
    ]) {
      expect(() => decodeCursor(value), value)
        .to.throw()
        .with.property('code', 'common.bad_request');
    }
  });
});

describe('download file names (RFC 6266)', () => {
  it('gives an ASCII fallback and the exact UTF-8 name', () => {
    expect(attachment('symphony.wav')).to.equal(`attachment; filename="symphony.wav"; filename*=UTF-8''symphony.wav`);
    expect(attachment('Dvořák "live" (1).wav')).to.equal(
      `attachment; filename="Dvo__k _live_ (1).wav"; filename*=UTF-8''Dvo%C5%99%C3%A1k%20%22live%22%20%281%29.wav`,
    );
  });
});
