import { GetObjectCommand } from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { lapseOf } from '../storage/presign';
import type { Principal } from '../api-keys/types';
import { ensureCertificate, type CertificateDeps } from '../certificates/service';
import { workVersion } from './service';

/** docs/api.md#downloads: a presigned GET valid 10 minutes. */
export const DOWNLOAD_URL_SECONDS = 600;

export interface Download {
  readonly url: string;
  readonly expiresAt: Date;
}

type Deps = CertificateDeps;

/**
 * The audio a version anchored (the latest when `version` is absent). A metadata-only version's row names
 * the object of the audio it reused, so it serves those very bytes.
 */
export async function audioDownload(app: Deps, principal: Principal, workId: string, version?: number): Promise<Download> {
  const found = await workVersion(app.db, principal, workId, version);
  return presignGet(app, found.version.audioKey, found.version.filename);
}

/** A version's certificate, rendered first if S3 does not hold it yet. */
export async function certificateDownload(app: Deps, principal: Principal, workId: string, version?: number): Promise<Download> {
  const { work, version: found } = await workVersion(app.db, principal, workId, version);
  const key = await ensureCertificate(app, work, found);
  return presignGet(app, key, `certificate-${work.network}-${work.atsId}-v${found.version}.pdf`, 'application/pdf');
}

async function presignGet(app: Deps, key: string, filename: string, contentType?: string): Promise<Download> {
  const command = new GetObjectCommand({
    Bucket: app.storage.bucket,
    Key: key,
    ResponseContentDisposition: attachment(filename),
    ...(contentType ? { ResponseContentType: contentType } : {}),
  });
  const signingDate = new Date();
  const url = await getSignedUrl(app.storage.client, command, { expiresIn: DOWNLOAD_URL_SECONDS, signingDate });
  return { url, expiresAt: lapseOf(signingDate, DOWNLOAD_URL_SECONDS) };
}

/** RFC 6266: an ASCII fallback name and the exact UTF-8 one, so the browser saves the file under its name. */
export function attachment(filename: string): string {
  const fallback = filename.replace(/[^\x20-\x7E]|["\\%]/g, '_');
  const exact = encodeURIComponent(filename).replace(/['()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
  return `attachment; filename="${fallback}"; filename*=UTF-8''${exact}`;
}
