import { expect } from 'chai';
import fc from 'fast-check';
import { figure, renderTable, type BenchResult, type Figure } from '../../bench/lib/report';
import { median } from '../../bench/lib/stats';

/**
 * The benches' verdict on a target measured against a floor (bench/lib/report.ts, `judge`): each run beside its own
 * floor, as the share rows judge it, never the median of one against the median of the other.
 */
describe('the benches’ verdict on a target against a floor', () => {
  const atLeast40 = { text: '≥ 40% of the floor', met: (v: number, floor: number) => v >= 0.4 * floor };
  const share = (runs: number[], floor: number[]) =>
    figure({
      id: 's',
      label: 'share',
      unit: '%',
      runs: runs.map((r, i) => (100 * r) / floor[i]!),
      target: { text: '≥ 40%', met: (v) => v >= 40 },
    });

  // init against /healthz, req/s: the full run of section 44 (39.5 / 43.5 / 38.4 %) and `bench api` after it (33.5 / 46.9 / 40.9 %)
  for (const c of [
    { when: 'the full run, where the medians said yes', runs: [7851, 7490, 6041], floor: [19880, 17226, 15733], runsMet: 1 },
    { when: 'the rerun, where the medians said no', runs: [7266, 9054, 6293], floor: [21663, 19318, 15371], runsMet: 2 },
  ]) {
    it(`judges each run beside its own floor: ${c.when}`, () => {
      const byMedians = atLeast40.met(median(c.runs), median(c.floor));
      const f = figure({
        id: 'init_rps',
        label: 'init',
        unit: 'req/s',
        runs: c.runs,
        floor: { label: 'healthz', runs: c.floor },
        target: atLeast40,
      });
      expect(f.target).to.deep.equal({ text: atLeast40.text, met: c.runsMet === 2, runsMet: c.runsMet });
      expect(f.target?.met, 'the medians alone gave the other verdict').to.equal(!byMedians);
      expect(share(c.runs, c.floor).target?.met).to.equal(f.target?.met);
    });
  }

  it('always agrees with the share row over an odd number of runs', () => {
    const run = fc.record({ value: fc.integer({ min: 1, max: 100_000 }), floor: fc.integer({ min: 1, max: 100_000 }) });
    const apart = (r: { value: number; floor: number }) => Math.abs((100 * r.value) / r.floor - 40) > 0.01; // the share row rounds to 0.01
    fc.assert(
      fc.property(
        fc.array(run.filter(apart), { minLength: 1, maxLength: 9 }).filter((rs) => rs.length % 2 === 1),
        (rs) => {
          const runs = rs.map((r) => r.value);
          const floor = rs.map((r) => r.floor);
          const f = figure({ id: 'x', label: 'x', unit: '/s', runs, floor: { label: 'floor', runs: floor }, target: atLeast40 });
          expect(f.target?.met).to.equal(share(runs, floor).target?.met);
          expect(f.target?.runsMet).to.equal(rs.filter((r) => r.value >= 0.4 * r.floor).length);
        },
      ),
    );
  });

  it('judges the medians where the floor was not measured run by run, or there is none', () => {
    const once = figure({
      id: 'x',
      label: 'x',
      unit: 'ms',
      runs: [10, 30, 20],
      floor: { label: 'once', runs: [25] },
      target: { text: '≤ floor', met: (v, f) => v <= f },
    });
    expect(once.target).to.deep.equal({ text: '≤ floor', met: true });
    const none = figure({ id: 'y', label: 'y', unit: 'ms', runs: [21, 19, 25], target: { text: '< 20 ms', met: (v) => v < 20 } });
    expect(none.target).to.deep.equal({ text: '< 20 ms', met: false });
  });

  it('shows in the table in how many runs the target held', () => {
    const judged = figure({
      id: 'a',
      label: 'judged',
      unit: '/s',
      runs: [1, 5, 5],
      floor: { label: 'floor', runs: [10, 10, 10] },
      target: atLeast40,
    });
    const plain = figure({ id: 'b', label: 'plain', unit: '%', runs: [50], target: { text: '≥ 40%', met: (v) => v >= 40 } });
    const table = renderTable([result([judged, plain])]);
    const row = (label: string) => table.split('\n').find((line) => line.includes(label))!;
    expect(row('judged')).to.match(/yes \(2 of 3 runs\)$/);
    expect(row('plain')).to.match(/ yes$/);
  });
});

function result(figures: Figure[]): BenchResult {
  return {
    bench: 'test',
    smoke: true,
    startedAt: new Date(0).toISOString(),
    durationSeconds: 0,
    machine: {
      cpus: 2,
      cpuModel: 'x',
      memoryGiB: 1,
      platform: 'x',
      loadAverageAtStart: [],
      loadAverageAtEnd: [],
      meltdownMitigation: 'x',
      pcid: true,
    },
    node: 'x',
    versions: {},
    parameters: {},
    figures,
    notes: [],
  } as unknown as BenchResult;
}
