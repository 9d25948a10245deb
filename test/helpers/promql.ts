/**
 * The metric names a PromQL expression reads, for checking docs/operations against what the code exposes:
 * string literals, comments, Grafana variables ($network, ${datasource}, $__rate_interval), label matchers,
 * ranges and subqueries, and the label lists of by / without / on / ignoring / group_left / group_right go;
 * of the identifiers left, those followed by `(` are functions or aggregations, and the operators' keywords
 * are not names. Numbers and durations are never names. A Grafana variable query `label_values(m, label)`
 * reads m.
 */
const KEYWORDS = new Set(['and', 'or', 'unless', 'bool', 'offset', 'atan2', 'inf', 'nan', 'by', 'without', 'on', 'ignoring']);

export function metricNames(expr: string): string[] {
  const labelValues = /^\s*label_values\s*\(\s*(.*?)\s*,\s*[a-zA-Z_][a-zA-Z0-9_]*\s*\)\s*$/s.exec(expr);
  if (labelValues) return metricNames(labelValues[1]!);
  const code = expr
    .replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`/g, '""')
    .replace(/#[^\n]*/g, ' ')
    .replace(/\$\{[^}]*\}|\$[a-zA-Z_][a-zA-Z0-9_]*/g, ' ')
    .replace(/\{[^}]*\}/g, ' ')
    .replace(/\[[^\]]*\]/g, ' ')
    .replace(/\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/gi, ' ');
  const names = new Set<string>();
  for (const token of code.matchAll(/0x[0-9a-fA-F]+|[0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?[a-zA-Z0-9_]*|[a-zA-Z_:][a-zA-Z0-9_:]*/g)) {
    const word = token[0];
    if (/^[0-9.]/.test(word) || KEYWORDS.has(word.toLowerCase())) continue;
    if (
      code
        .slice(token.index + word.length)
        .trimStart()
        .startsWith('(')
    )
      continue;
    names.add(word);
  }
  return [...names];
}

export interface MetricFamily {
  readonly name: string;
  readonly type: 'counter' | 'gauge' | 'histogram' | 'summary' | 'untyped';
}

/** The series names a family is read by in PromQL: a histogram by its _bucket, _sum and _count only. */
export function seriesNames(families: readonly MetricFamily[]): Set<string> {
  const names = new Set<string>();
  for (const { name, type } of families) {
    if (type === 'histogram') for (const suffix of ['_bucket', '_sum', '_count']) names.add(name + suffix);
    else if (type === 'summary') for (const suffix of ['', '_sum', '_count']) names.add(name + suffix);
    else names.add(name);
  }
  return names;
}

/** The families of a Prometheus text exposition, from its `# TYPE` lines (present even before any sample). */
export function exposedFamilies(text: string): MetricFamily[] {
  return [...text.matchAll(/^# TYPE (\S+) (counter|gauge|histogram|summary|untyped)$/gm)].map((m) => ({
    name: m[1]!,
    type: m[2] as MetricFamily['type'],
  }));
}
