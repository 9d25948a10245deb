import { expect } from 'chai';
import { isUnavailable } from '../../web/middleware/errors';

const withCode = (code: string, message = 'x') => Object.assign(new Error(message), { code });

/**
 * What the web answers 503 rather than 500 (web/middleware/errors.ts): a dependency that cannot serve now, in the
 * words each library uses for it. A bug of ours, whatever its wording, stays a 500.
 */
describe('a dependency that cannot serve now (503, not 500)', () => {
  it("knows pg's timeouts of a bounded pool, bare and after the statement knex sent", () => {
    for (const message of [
      'Query read timeout',
      'select "id" from "works" where "organization_id" = $1 - Query read timeout',
      'COMMIT; - Query read timeout',
      'timeout expired',
      'Knex: Timeout acquiring a connection. The pool is probably full. Are you missing a .transacting(trx) call?',
      'Connection terminated unexpectedly',
      'Client has encountered a connection error and is not queryable',
    ])
      expect(isUnavailable(new Error(message)), message).to.equal(true);
  });

  it("knows the connection's and PostgreSQL's codes for a server away, starting, full or read-only", () => {
    for (const code of ['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'EAI_AGAIN'])
      expect(isUnavailable(withCode(code)), code).to.equal(true);
    for (const code of ['57P01', '57P03', '53300', '25006', '57014']) expect(isUnavailable(withCode(code)), code).to.equal(true);
  });

  it('leaves anything else a 500: a constraint, a syntax error, a timeout of our own wording', () => {
    for (const err of [
      withCode('23505', 'duplicate key value violates unique constraint'),
      withCode('42601', 'syntax error'),
      new Error('the timeout expired before the render ended'),
      new Error('Query read timeout while parsing the answer'),
      new TypeError("Cannot read properties of undefined (reading 'id')"),
      undefined,
      'a string',
    ])
      expect(isUnavailable(err), String(err)).to.equal(false);
  });
});
