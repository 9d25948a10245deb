import { readFileSync } from 'node:fs';

/**
 * `node --import tsx bench/lib/profile.ts <file.cpuprofile> [top] [from_s] [to_s]`: a text summary of a
 * `--cpu-prof` profile (what `npm run bench -- <name> --profile DIR` writes), optionally of a window of it in
 * seconds from its start: self time by function and by package, and inclusive time of the hottest functions,
 * so a finding can be read without a browser. The times are the profile's own: the wall-clock time between samples,
 * so on a machine the bench saturates, a thread's wait for a core counts in the function it resumed in (likely a
 * system call that woke another process). The CPU a process spent is the bench's /proc figure, not these
 * (docs/performance.md, section 39).
 */
interface Node {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}

function main(): void {
  const [file, topArg, fromArg, toArg] = process.argv.slice(2);
  if (!file) throw new Error('usage: profile.ts <file.cpuprofile> [top]');
  const top = Number(topArg ?? 25);
  const profile = JSON.parse(readFileSync(file, 'utf8')) as { nodes: Node[]; samples: number[]; timeDeltas: number[] };
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const self = new Map<number, number>();
  const [from, to] = [Number(fromArg ?? 0) * 1e6, Number(toArg ?? Infinity) * 1e6];
  let at = 0;
  profile.samples.forEach((id, i) => {
    at += profile.timeDeltas[i] ?? 0;
    if (at >= from && at <= to) self.set(id, (self.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0));
  });
  const total = [...self.values()].reduce((a, b) => a + b, 0);

  const name = (n: Node) => `${n.callFrame.functionName || '(anonymous)'} ${shortUrl(n.callFrame.url)}:${n.callFrame.lineNumber + 1}`;
  const selfByName = new Map<string, number>();
  const byPackage = new Map<string, number>();
  const inclusive = new Map<string, number>();
  for (const [id, us] of self) {
    const n = byId.get(id)!;
    selfByName.set(name(n), (selfByName.get(name(n)) ?? 0) + us);
    byPackage.set(
      packageOf(n.callFrame.url, n.callFrame.functionName),
      (byPackage.get(packageOf(n.callFrame.url, n.callFrame.functionName)) ?? 0) + us,
    );
    const seen = new Set<string>();
    for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
      const key = name(byId.get(cur)!);
      if (seen.has(key)) continue;
      seen.add(key);
      inclusive.set(key, (inclusive.get(key) ?? 0) + us);
    }
  }
  const print = (title: string, map: Map<string, number>) => {
    process.stdout.write(`\n${title}\n`);
    for (const [k, us] of [...map].sort((a, b) => b[1] - a[1]).slice(0, top))
      process.stdout.write(`${((100 * us) / total).toFixed(1).padStart(6)}%  ${(us / 1000).toFixed(0).padStart(7)} ms  ${k}\n`);
  };
  process.stdout.write(`${file}: ${(total / 1e6).toFixed(1)} s sampled\n`);
  print('self time by package', byPackage);
  print('self time by function', selfByName);
  print('inclusive time by function', inclusive);
}

function shortUrl(url: string): string {
  const i = url.lastIndexOf('node_modules/');
  if (i >= 0) return url.slice(i + 'node_modules/'.length);
  return url.replace(/^file:\/\/.*?\/(web|jobs|shared|bench|test)\//, '$1/');
}

function packageOf(url: string, fn: string): string {
  if (!url) return fn.startsWith('(') ? fn : '(native)';
  const m = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (m) return m[1]!;
  if (url.startsWith('node:')) return 'node core';
  const own = /\/(web|jobs|shared|bench|test)\//.exec(url);
  return own ? `ours: ${own[1]}` : url;
}

main();
