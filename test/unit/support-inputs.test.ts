import { expect } from 'chai';
import { parseSince } from '../../shared/cli/since';
import { traceIdOf } from '../../shared/telemetry/tracing';

describe('support tools: what an operator types, and the trace a transaction keeps', () => {
  const now = new Date('2026-11-23T12:00:00.000Z');

  it('reads --since as a duration back from now, or as an RFC 3339 timestamp', () => {
    const cases: [string, string][] = [
      ['30m', '2026-11-23T11:30:00.000Z'],
      ['1h', '2026-11-23T11:00:00.000Z'],
      ['2d', '2026-11-21T12:00:00.000Z'],
      ['1.5h', '2026-11-23T10:30:00.000Z'],
      ['90 minutes', '2026-11-23T10:30:00.000Z'],
      ['1w', '2026-11-16T12:00:00.000Z'],
      ['2026-11-23T06:00:00Z', '2026-11-23T06:00:00.000Z'],
      ['2026-11-23T07:00:00.250+01:00', '2026-11-23T06:00:00.250Z'],
      // a moment after now is a window with nothing in it yet, not an error
      ['2026-11-24T00:00:00Z', '2026-11-24T00:00:00.000Z'],
    ];
    for (const [raw, expected] of cases) expect(parseSince(raw, now).toISOString(), raw).to.equal(expected);
  });

  it('refuses anything else with common.bad_request, naming the forms it takes', () => {
    for (const raw of [
      'yesterday',
      '5', // ms would read milliseconds
      '1.5',
      '-1h',
      '0m',
      '1 fortnight',
      ' 1h',
      `${'9'.repeat(20)}d`, // before the first representable moment
      '2026-02-30T00:00:00Z', // no such day (Date.parse would roll it into March)
      '2026-11-23T06:00:00', // no offset: whose 06:00?
      '2026-11-23',
      'P1D',
    ]) {
      expect(() => parseSince(raw, now), raw)
        .to.throw(/30m, 1h or 2d, or an ISO 8601 timestamp/)
        .with.property('code', 'common.bad_request');
    }
  });

  it('takes the trace id out of a W3C traceparent, and null from none or a malformed one', () => {
    expect(traceIdOf('00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01')).to.equal('4bf92f3577b34da6a3ce929d0e0e4736');
    expect(traceIdOf('00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00'), 'not sampled').to.equal(
      '4bf92f3577b34da6a3ce929d0e0e4736',
    );
    for (const bad of [
      null,
      '',
      '00-00000000000000000000000000000000-00f067aa0ba902b7-01', // the invalid all-zero trace id
      'ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01', // version ff is forbidden
      '00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01', // upper case is not the format
      '00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01',
      '4bf92f3577b34da6a3ce929d0e0e4736',
    ])
      expect(traceIdOf(bad), String(bad)).to.equal(null);
  });
});
