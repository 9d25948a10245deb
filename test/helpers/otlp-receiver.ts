import http from 'node:http';
import { EventEmitter } from 'node:events';

/** A span as an OTLP/HTTP JSON export carries it, with its resource's service name. */
export interface ReceivedSpan {
  readonly service: string;
  readonly traceId: string;
  readonly spanId: string;
  readonly parentSpanId: string;
  readonly name: string;
  readonly kind: number;
  readonly attributes: Record<string, string | number | boolean>;
  readonly links: { traceId: string; spanId: string }[];
  readonly status: { code?: number; message?: string };
}

type OtlpValue = { stringValue?: string; intValue?: string | number; boolValue?: boolean; doubleValue?: number };
type OtlpAttribute = { key: string; value: OtlpValue };

const valueOf = (v: OtlpValue): string | number | boolean =>
  v.stringValue ?? (v.intValue !== undefined ? Number(v.intValue) : (v.boolValue ?? v.doubleValue ?? ''));

const attributesOf = (list: OtlpAttribute[] | undefined) => Object.fromEntries((list ?? []).map((a) => [a.key, valueOf(a.value)]));

/**
 * A real OTLP/HTTP trace receiver (JSON encoding, as `@opentelemetry/exporter-trace-otlp-http` sends): what the
 * service's processes export when `OTEL_EXPORTER_OTLP_ENDPOINT` points at it. `raw` keeps every body as sent.
 */
export class OtlpReceiver {
  readonly spans: ReceivedSpan[] = [];
  readonly raw: string[] = [];
  private readonly events = new EventEmitter();
  private server!: http.Server;
  endpoint = '';

  async start(): Promise<this> {
    this.server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const body = Buffer.concat(chunks).toString('utf8');
        if (req.url !== '/v1/traces' || !String(req.headers['content-type']).startsWith('application/json')) {
          res.writeHead(415).end();
          return;
        }
        this.raw.push(body);
        this.collect(JSON.parse(body));
        res.writeHead(200, { 'Content-Type': 'application/json' }).end('{}');
        this.events.emit('spans');
      });
    });
    await new Promise<void>((resolve, reject) => this.server.once('error', reject).listen(0, '127.0.0.1', resolve));
    this.endpoint = `http://127.0.0.1:${(this.server.address() as { port: number }).port}`;
    return this;
  }

  private collect(body: { resourceSpans?: any[] }): void {
    for (const resourceSpans of body.resourceSpans ?? []) {
      const service = String(attributesOf(resourceSpans.resource?.attributes)['service.name'] ?? '');
      for (const scope of resourceSpans.scopeSpans ?? [])
        for (const s of scope.spans ?? [])
          this.spans.push({
            service,
            traceId: s.traceId,
            spanId: s.spanId,
            parentSpanId: s.parentSpanId ?? '',
            name: s.name,
            kind: s.kind,
            attributes: attributesOf(s.attributes),
            links: (s.links ?? []).map((l: any) => ({ traceId: l.traceId, spanId: l.spanId })),
            status: s.status ?? {},
          });
    }
  }

  /** Resolves with the spans once `ready` holds of them (checked at every export), or rejects after `timeoutMs`. */
  until<T>(ready: (spans: readonly ReceivedSpan[]) => T | undefined, timeoutMs = 60_000): Promise<T> {
    return new Promise((resolve, reject) => {
      const check = () => {
        const found = ready(this.spans);
        if (found === undefined) return false;
        clearTimeout(timer);
        this.events.off('spans', check);
        resolve(found);
        return true;
      };
      const timer = setTimeout(() => {
        this.events.off('spans', check);
        reject(new Error(`the spans awaited did not arrive (${this.spans.length} received)`));
      }, timeoutMs);
      if (!check()) this.events.on('spans', check);
    });
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((r) => this.server.close(() => r()));
  }
}
