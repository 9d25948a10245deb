import { expect } from 'chai';
import { call } from './app';

export interface Sample {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
}

/**
 * One scrape in Prometheus' text exposition format, parsed: the metric families it declares (`# TYPE`) and
 * its samples, written independently of prom-client (label values unescaped: `\\`, `\"`, `\n`).
 */
export class Scrape {
  readonly types = new Map<string, string>();
  readonly samples: Sample[] = [];

  constructor(readonly text: string) {
    for (const line of text.split('\n')) {
      if (!line.trim()) continue;
      const type = /^# TYPE (\S+) (\S+)$/.exec(line);
      if (type) this.types.set(type[1]!, type[2]!);
      if (line.startsWith('#')) continue;
      this.samples.push(parseSample(line));
    }
  }

  /** The value of the series with exactly these labels, or undefined when the scrape has none. */
  value(name: string, labels: Record<string, string> = {}): number | undefined {
    const wanted = JSON.stringify(Object.entries(labels).sort());
    return this.samples.find((s) => s.name === name && JSON.stringify(Object.entries(s.labels).sort()) === wanted)?.value;
  }

  /** The series' value, 0 when absent (a labelled counter or histogram not yet touched has no series). */
  count(name: string, labels: Record<string, string> = {}): number {
    return this.value(name, labels) ?? 0;
  }

  /** Every series of a metric. */
  series(name: string): Sample[] {
    return this.samples.filter((s) => s.name === name);
  }
}

function parseSample(line: string): Sample {
  const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)( \d+)?$/.exec(line);
  if (!match) throw new Error(`not a sample line: ${line}`);
  const labels: Record<string, string> = {};
  const body = match[3] ?? '';
  const label = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)",?/gy;
  let read = 0;
  for (let m = label.exec(body); m; m = label.exec(body)) {
    labels[m[1]!] = m[2]!.replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c));
    read = label.lastIndex;
  }
  if (read !== body.length) throw new Error(`bad labels: ${line}`);
  const raw = match[4]!;
  // Go's ParseFloat, as Prometheus reads it: NaN in any case (prom-client writes `Nan`), ±Inf
  const value = /^nan$/i.test(raw) ? NaN : raw === '+Inf' ? Infinity : raw === '-Inf' ? -Infinity : Number(raw);
  if (Number.isNaN(value) && !/^nan$/i.test(raw)) throw new Error(`bad value: ${line}`);
  return { name: match[1]!, labels, value };
}

/** GETs `/metrics` of `base` (a web's or a worker's) with these headers and parses it, asserting a 200 in the exposition format. */
export async function scrape(base: string, headers: Record<string, string>): Promise<Scrape> {
  const reply = await call(base, 'GET', '/metrics', { headers });
  expect(reply.status, reply.text).to.equal(200);
  expect(reply.headers.get('content-type')).to.match(/^text\/plain; version=0\.0\.4/);
  return new Scrape(reply.text);
}
