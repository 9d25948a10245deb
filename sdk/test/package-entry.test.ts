import { expect } from 'chai';
// as a partner imports it: the package name, resolved by the workspace (tsconfig `paths` for the type checker)
import * as client from '@works-api/client';
import { createClient, computeCommitment, verifyAnchor, verifyWebhook, RegistrationError, WorksApiError } from '@works-api/client';

describe('@works-api/client: the package entry', () => {
  it('exports createClient, verifyWebhook, computeCommitment and verifyAnchor as functions, and the error classes', () => {
    for (const fn of [createClient, verifyWebhook, computeCommitment, verifyAnchor]) expect(fn).to.be.a('function');
    expect(Object.keys(client)).to.include.members(['createClient', 'verifyWebhook', 'computeCommitment', 'verifyAnchor']);
    expect(
      new RegistrationError(new WorksApiError({ status: 0, code: 'network.error', message: 'x' }), { stage: 'init' }),
    ).to.be.instanceOf(WorksApiError);
  });
});
