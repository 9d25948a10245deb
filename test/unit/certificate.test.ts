import { expect } from 'chai';
import { PDFParse } from 'pdf-parse';
import { renderCertificate } from '../../shared/certificates/render';
import { EXAMPLE } from '../tools/certificate-example';

async function read(pdf: Buffer): Promise<{ text: string; pages: number }> {
  const parser = new PDFParse({ data: new Uint8Array(pdf) });
  try {
    const result = await parser.getText();
    return { text: result.text.replace(/\s+/g, ' '), pages: result.total };
  } finally {
    await parser.destroy();
  }
}

describe('certificate PDF', () => {
  it('states every fact of the version on one A4 page', async () => {
    const pdf = await renderCertificate(EXAMPLE);
    expect(pdf.subarray(0, 5).toString()).to.equal('%PDF-');
    const { text, pages } = await read(pdf);
    expect(pages).to.equal(1);
    for (const fact of [
      EXAMPLE.title,
      EXAMPLE.filename,
      EXAMPLE.commitment,
      EXAMPLE.mediaHash,
      EXAMPLE.merkleRoot,
      EXAMPLE.blockHash,
      EXAMPLE.txHash,
      EXAMPLE.owner,
      EXAMPLE.explorerUrl,
      EXAMPLE.workId,
      '#1284',
      '4,521,877',
      'testnet',
      '2026-11-22 14:03:27',
      'Ada Lovelace',
      'Author, Composer',
      '00012345678',
      '0000 0001 2146 438X',
      'Léonie Dvořáková',
      'Version 2',
      'SHA-256 of the audio file',
      'Merkle tree of 32 slots',
    ]) {
      expect(text, fact).to.include(fact);
    }
  });

  it('continues a long list of creators on further pages, naming each once, in any script', async () => {
    const creators = Array.from({ length: 32 }, (_, i) => ({
      full_name: i % 4 ? `Creator ${i + 1}` : `Пётр Чайковский ${i + 1}`,
      roles: { composer: true },
      ipi: '00012345678',
    }));
    const title = 'Концерт № 1 — '.concat('a very long title '.repeat(16)).trim();
    const { text, pages } = await read(await renderCertificate({ ...EXAMPLE, title, creators }));
    expect(pages).to.be.within(2, 4);
    for (const [i, creator] of creators.entries()) {
      const row = new RegExp(`(?<!\\d)${i + 1}\\. ${creator.full_name}(?!\\d)`, 'g');
      expect(text.match(row), creator.full_name).to.have.length(1);
    }
    expect(text).to.include('Концерт № 1');
    expect(text).to.include(`page ${pages} of ${pages}`);
    expect(text).to.include(EXAMPLE.commitment);
  });
});
