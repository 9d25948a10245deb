import { expect } from 'chai';
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { DeleteObjectCommand, GetObjectCommand, HeadObjectCommand } from '@aws-sdk/client-s3';
import { PDFParse } from 'pdf-parse';
import { call, eventually, expectError, type TestApp } from '../helpers/app';
import { createOrg, createKey, type TestKey } from '../helpers/factories';
import { useStack } from '../helpers/workers';
import { initBody, register, urlLapse } from '../helpers/registration';
import { certificateKey, renderCertificateOf } from '../../shared/certificates/service';
import { putObject } from '../../shared/storage/objects';

async function pdfText(bytes: Buffer): Promise<{ text: string; pages: number }> {
  const parser = new PDFParse({ data: new Uint8Array(bytes) });
  try {
    const result = await parser.getText();
    return { text: result.text, pages: result.total };
  } finally {
    await parser.destroy();
  }
}

/** Detail, versions, creators and downloads (docs/api.md#work-detail, docs/api.md#downloads) of a work registered on the local chain. */
describe('a registered work read back: details, downloads and certificates', function () {
  this.timeout(180_000);
  const stack = useStack({ env: { REDIS_PREFIX: `works_read_${Date.now()}` }, queues: ['prepare', 'chain', 'webhooks', 'certificates'] });
  let app: TestApp;
  let org: string;
  let key: TestKey;
  let work: { id: string; atsId: number; audio: Buffer; result: Record<string, any>; title: string };
  const get = (path: string, token = key.token) => call(app.url, 'GET', path, { token });
  const fetchBytes = async (url: string) => {
    const res = await fetch(url);
    expect(res.status, url).to.equal(200);
    return { bytes: Buffer.from(await res.arrayBuffer()), headers: res.headers };
  };
  const session = async (ref: string) =>
    (await call(app.url, 'POST', '/v1/sessions', { token: key.token, body: { external_user_ref: ref } })).body.session_token as string;
  const exists = (objectKey: string) =>
    app.context.storage.client.send(new HeadObjectCommand({ Bucket: app.context.storage.bucket, Key: objectKey })).then(
      () => true,
      () => undefined,
    );

  before(async () => {
    app = stack.app;
    org = await createOrg(app.context, 1000);
    key = await createKey(app.context, org);
    const audio = randomBytes(48 * 1024);
    const body = initBody({ external_user_ref: 'musician-7', title: '  Nocturne for Relays  ' });
    const registered = await register(app.url, key.token, body, audio);
    expect(registered.confirm.status).to.equal(202);
    const txId = registered.confirm.body.transaction_id;
    const result = await eventually(
      async () => {
        const reply = await get(`/v1/transactions/${txId}`);
        return reply.body.status === 'finalized' ? reply.body.result : undefined;
      },
      'the registration to finalize',
      120_000,
    );
    work = { id: registered.jobId, atsId: result.ats_id, audio, result, title: 'Nocturne for Relays' };
  });

  it('answers the detail, versions and creators of the work, scoped to the organization, ignoring any ref', async () => {
    const row = await app.context.db('works').where({ id: work.id }).first();
    const detail = await get(`/v1/works/${work.atsId}?external_user_ref=someone-else`);
    expect(detail.status).to.equal(200);
    expect(detail.body).to.deep.equal({
      id: work.id,
      ats_id: work.atsId,
      owner: row.owner,
      latest_version: 1,
      latest_commitment: row.latest_commitment,
      created_at: row.created_at.toISOString(),
      latest_version_at: row.latest_version_at.toISOString(),
      title: work.title,
      asset_filename: 'symphony.wav',
      has_files: true,
      network: 'testnet',
      external_user_ref: 'musician-7',
      versions_count: 1,
    });
    expect((await get(`/v1/works/${work.atsId}?network=testnet`)).body).to.deep.equal(detail.body);
    expectError(await get(`/v1/works/${work.atsId}?network=mainnet`), 404, 'common.not_found');
    expectError(await get(`/v1/works/${work.atsId}?network=moon`), 400, 'common.bad_request');

    const versions = await get(`/v1/works/${work.atsId}/versions`);
    expect(versions.body).to.deep.equal({
      versions: [
        {
          version: 1,
          commitment: row.latest_commitment,
          title: work.title,
          filename: 'symphony.wav',
          tx_hash: work.result.tx_hash,
          block_number: work.result.block_number,
          block_hash: work.result.block_hash,
          finalized_at: work.result.finalized_at,
        },
      ],
    });

    const creators = await get(`/v1/works/${work.atsId}/creators`);
    expect(creators.body).to.deep.equal({
      version: 1,
      creators: [
        {
          full_name: 'Ada Lovelace',
          roles: { author: true, composer: true, arranger: false, adapter: false },
          ipi: '00012345678',
          isni: '000000012146438X',
          email: 'ada@example.test',
        },
        {
          full_name: 'Charles Babbage',
          roles: { author: false, composer: false, arranger: true, adapter: false },
          ipi: null,
          isni: null,
          email: null,
        },
      ],
    });
    expect((await get(`/v1/works/${work.atsId}/creators?version=1`)).body).to.deep.equal(creators.body);
    expectError(await get(`/v1/works/${work.atsId}/creators?version=2`), 404, 'common.not_found');
    for (const path of ['/v1/works/999999999', '/v1/works/abc', '/v1/works/999999999/versions', '/v1/works/999999999/creators']) {
      expectError(await get(path), 404, 'common.not_found');
    }
  });

  it('hides the work from another organization (404 by ats_id and by UUID) and from other end-users', async () => {
    const stranger = await createKey(app.context, await createOrg(app.context));
    for (const path of [`/v1/works/${work.atsId}`, `/v1/works/${work.atsId}/versions`, `/v1/works/${work.atsId}/creators`]) {
      expectError(await get(path, stranger.token), 404, 'common.not_found');
    }
    for (const path of [`/download/asset`, `/download/certificate`, `/versions/1/download/audio`, `/versions/1/download/certificate`]) {
      expectError(await get(`/v1/works/${work.id}${path}`, stranger.token), 404, 'common.not_found');
      expectError(await get(`/v1/works/${work.id}${path}`, await session('someone-else')), 404, 'common.not_found');
    }
    expectError(await get(`/v1/works/${randomUUID()}/download/asset`), 404, 'common.not_found');
    expectError(await get(`/v1/works/not-a-uuid/download/asset`), 404, 'common.not_found');
    // the detail routes too take the work's own end user, not another (docs/api.md#sessions)
    expect((await get(`/v1/works/${work.atsId}`, await session('musician-7'))).status).to.equal(200);
    expectError(await get(`/v1/works/${work.atsId}`, await session('someone-else')), 404, 'common.not_found');
    const writer = await createKey(app.context, org, ['works:register']);
    expectError(await get(`/v1/works/${work.atsId}`, writer.token), 403, 'auth.insufficient_scope');
    expectError(await get(`/v1/works/${work.id}/download/asset`, writer.token), 403, 'auth.insufficient_scope');
  });

  it('presigns the exact uploaded audio, for the key and for the work’s end-user session', async () => {
    for (const [path, token] of [
      ['/download/asset', key.token],
      ['/versions/1/download/audio', key.token],
      ['/download/asset', await session('musician-7')],
    ] as const) {
      const reply = await get(`/v1/works/${work.id}${path}`, token);
      expect(reply.status).to.equal(200);
      expect(Object.keys(reply.body)).to.have.members(['url', 'expires_at']);
      const ttl = new Date(reply.body.expires_at).getTime() - Date.now();
      expect(ttl).to.be.within(590_000, 600_000);
      expect(new URL(reply.body.url).searchParams.get('X-Amz-Expires')).to.equal('600');
      // expires_at is when S3 stops taking the URL, to the millisecond
      expect(Date.parse(reply.body.expires_at)).to.equal(urlLapse(reply.body.url));
      const { bytes, headers } = await fetchBytes(reply.body.url);
      expect(Buffer.compare(bytes, work.audio)).to.equal(0);
      expect(headers.get('content-disposition')).to.equal(`attachment; filename="symphony.wav"; filename*=UTF-8''symphony.wav`);
    }
    expectError(await get(`/v1/works/${work.id}/versions/2/download/audio`), 404, 'common.not_found');
    expectError(await get(`/v1/works/${work.id}/versions/0/download/audio`), 404, 'common.not_found');
    expectError(await get(`/v1/works/${work.id}/versions/latest/download/audio`), 404, 'common.not_found');
  });

  it('renders the certificate in the worker after finality, stores it in S3, and serves it as a PDF', async () => {
    const objectKey = certificateKey({ organizationId: org, id: work.id }, 1);
    await eventually(() => exists(objectKey), 'the certificates worker to store the PDF', 60_000);
    for (const path of ['/download/certificate', '/versions/1/download/certificate']) {
      const reply = await get(`/v1/works/${work.id}${path}`, path.startsWith('/versions') ? await session('musician-7') : key.token);
      expect(reply.status).to.equal(200);
      const { bytes, headers } = await fetchBytes(reply.body.url);
      expect(headers.get('content-type')).to.equal('application/pdf');
      expect(headers.get('content-disposition')).to.include(`certificate-testnet-${work.atsId}-v1.pdf`);
      expect(bytes.subarray(0, 5).toString()).to.equal('%PDF-');
      const { text, pages } = await pdfText(bytes);
      expect(pages).to.equal(1);
      const flat = text.replace(/\s+/g, ' ');
      for (const expected of [
        work.title,
        (await app.context.db('works').where({ id: work.id }).first()).latest_commitment,
        work.result.block_hash,
        work.result.tx_hash,
        'Ada Lovelace',
        'Charles Babbage',
        'symphony.wav',
      ]) {
        expect(flat, expected).to.include(expected);
      }
      expect(flat).to.include(work.result.explorer_url);
    }
  });

  it("renders in the worker's first run without asking S3 first; a rerun keeps what S3 already has", async () => {
    const objectKey = certificateKey({ organizationId: org, id: work.id }, 1);
    await eventually(() => exists(objectKey), 'the certificates worker to store the PDF', 60_000);
    const read = async () => {
      const got = await app.context.storage.client.send(new GetObjectCommand({ Bucket: app.context.storage.bucket, Key: objectKey }));
      return Buffer.from(await got.Body!.transformToByteArray()).toString('latin1');
    };
    await putObject(app.context.storage, objectKey, Buffer.from('stored before'), 'application/pdf');
    // a rerun (the job's attempts after its first) asks, and finds it
    expect(await renderCertificateOf(app.context, work.id, 1)).to.equal(objectKey);
    expect(await read()).to.equal('stored before');
    // a first run renders and stores without asking
    expect(await renderCertificateOf(app.context, work.id, 1, true)).to.equal(objectKey);
    expect((await read()).slice(0, 5)).to.equal('%PDF-');
  });

  it('a certificate states what PostgreSQL holds: its job carries ids only, and the link is the one finalization announced', async () => {
    const job = await app.context.queues.certificates.getJob(`certificate-${work.id}-1`);
    expect(job!.data, 'nothing a certificate states rides in the job (Bull Board can edit job data)').to.deep.equal({
      workId: work.id,
      version: 1,
    });
    const objectKey = certificateKey({ organizationId: org, id: work.id }, 1);
    const stated = async () => {
      const got = await app.context.storage.client.send(new GetObjectCommand({ Bucket: app.context.storage.bucket, Key: objectKey }));
      return (await pdfText(Buffer.from(await got.Body!.transformToByteArray()))).text.replace(/\s+/g, ' ');
    };
    const transactionId = (await app.context.db('work_versions').where({ work_id: work.id, version: 1 }).first()).transaction_id;
    const announced = 'https://explorer.example/announced-in-the-result/1-2';
    const { result } = await app.context.db('transactions').where({ id: transactionId }).first('result');
    await app.context
      .db('transactions')
      .where({ id: transactionId })
      .update({ result: { ...result, explorer_url: announced } });
    try {
      expect(await renderCertificateOf(app.context, work.id, 1, true)).to.equal(objectKey);
      expect(await stated()).to.include(announced);
    } finally {
      await app.context.db('transactions').where({ id: transactionId }).update({ result });
    }
    expect(await renderCertificateOf(app.context, work.id, 1, true)).to.equal(objectKey);
    expect(await stated()).to.include(work.result.explorer_url);
    expect(await renderCertificateOf(app.context, work.id, 9), 'no such version').to.equal(undefined);
    expect(await renderCertificateOf(app.context, randomUUID(), 1), 'no such work').to.equal(undefined);
  });

  it('serves a second version: its own commitment, the audio it anchored, and a certificate rendered on demand', async () => {
    // a metadata-only version as finalization writes one (issue 6): new creators and commitment, the v1 audio object
    const v1 = await app.context.db('work_versions').where({ work_id: work.id, version: 1 }).first();
    const v1tx = await app.context.db('transactions').where({ id: v1.transaction_id }).first();
    const txId = randomUUID();
    const commitment = `0x${createHash('sha256').update('v2').digest('hex')}`;
    const finalizedAt = new Date(Date.now() + 1000);
    const creators = [{ full_name: 'Grace Hopper', roles: { adapter: true }, isni: '000000012146438X' }];
    await app.context.db('transactions').insert({
      ...v1tx,
      id: txId,
      job_id: randomUUID(), // a job of its own: one transaction per job
      type: 'add_version',
      version: 2,
      tx_hash: `0x${'ab'.repeat(32)}`,
      steps: JSON.stringify(v1tx.steps),
      anchor: JSON.stringify(v1tx.anchor),
      result: JSON.stringify({ explorer_url: work.result.explorer_url }),
    });
    await app.context.db('work_versions').insert({
      ...v1,
      version: 2,
      transaction_id: txId,
      commitment,
      creators: JSON.stringify(creators),
      tx_hash: `0x${'ab'.repeat(32)}`,
      block_number: v1.block_number + 3,
      finalized_at: finalizedAt,
    });
    await app.context
      .db('works')
      .where({ id: work.id })
      .update({ latest_version: 2, latest_commitment: commitment, latest_version_at: finalizedAt });

    const detail = await get(`/v1/works/${work.atsId}`);
    expect(detail.body).to.deep.include({
      latest_version: 2,
      latest_commitment: commitment,
      versions_count: 2,
      latest_version_at: finalizedAt.toISOString(),
    });
    const versions = (await get(`/v1/works/${work.atsId}/versions`)).body.versions;
    expect(versions.map((v: { version: number; commitment: string }) => [v.version, v.commitment])).to.deep.equal([
      [1, v1.commitment],
      [2, commitment],
    ]);
    expect((await get(`/v1/works/${work.atsId}/creators`)).body).to.deep.equal({
      version: 2,
      creators: [
        {
          full_name: 'Grace Hopper',
          roles: { author: false, composer: false, arranger: false, adapter: true },
          ipi: null,
          isni: '000000012146438X',
          email: null,
        },
      ],
    });
    expect((await get(`/v1/works/${work.atsId}/creators?version=1`)).body.creators[0].full_name).to.equal('Ada Lovelace');

    for (const path of ['/download/asset', '/versions/2/download/audio', '/versions/1/download/audio']) {
      const { bytes } = await fetchBytes((await get(`/v1/works/${work.id}${path}`)).body.url);
      expect(Buffer.compare(bytes, work.audio), path).to.equal(0);
    }

    // no worker rendered v2 (it was written by hand): the download renders it
    const v2Key = certificateKey({ organizationId: org, id: work.id }, 2);
    expect(await exists(v2Key)).to.equal(undefined);
    const latest = await get(`/v1/works/${work.id}/download/certificate`);
    const { text } = await pdfText((await fetchBytes(latest.body.url)).bytes);
    const flat = text.replace(/\s+/g, ' ');
    for (const expected of [work.title, commitment, 'Version 2', 'Grace Hopper', 'ISNI', v1.block_hash])
      expect(flat, expected).to.include(expected);
    expect(await exists(v2Key)).to.equal(true);

    // a certificate lost from S3 is rendered again when next asked for
    const v1Key = certificateKey({ organizationId: org, id: work.id }, 1);
    await app.context.storage.client.send(new DeleteObjectCommand({ Bucket: app.context.storage.bucket, Key: v1Key }));
    const again = await get(`/v1/works/${work.id}/versions/1/download/certificate`);
    expect((await pdfText((await fetchBytes(again.body.url)).bytes)).text.replace(/\s+/g, ' ')).to.include(v1.commitment);
  });
});
