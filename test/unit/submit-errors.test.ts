import { expect } from 'chai';
import { AlreadyImported, classifySubmitError, ExhaustsResources, SubmissionRejected } from '../../shared/chain/submit';

/** What the node's refusals of a submission mean for the bytes: gone for good, or perhaps still landing. */
describe('a refused submission, classified', () => {
  const classify = (message: string) => classifySubmitError(new Error(message));

  for (const message of [
    '1010: Invalid Transaction: Transaction is outdated',
    '1010: Invalid Transaction: Inability to pay some fees (e.g. account balance too low)',
    '1011: Unknown Transaction Validity: Could not lookup information required to validate the transaction',
    '1014: Priority is too low: (100 vs 100)',
  ]) {
    it(`"${message}": refused as sent, the node keeps no copy`, () => {
      const err = classify(message);
      expect(err).to.be.instanceOf(SubmissionRejected);
      expect((err as SubmissionRejected).mayStillLand).to.equal(false);
    });
  }

  for (const message of ['1012: Transaction is temporarily banned', '1013: Transaction Already Imported']) {
    it(`"${message}": the node held these bytes, they may still land`, () => {
      const err = classify(message);
      expect(err).to.be.instanceOf(SubmissionRejected);
      expect((err as SubmissionRejected).mayStillLand).to.equal(true);
    });
  }

  it('"1013: Transaction Already Imported" alone says the pool holds the bytes now: they are to be followed', () => {
    expect(classify('1013: Transaction Already Imported')).to.be.instanceOf(AlreadyImported);
    expect(classify('1012: Transaction is temporarily banned')).not.to.be.instanceOf(AlreadyImported);
  });

  for (const message of [
    '1010: Invalid Transaction: Transaction would exhaust the block limits',
    '1010: {"invalid":{"exhaustsResources":null}}',
  ]) {
    it(`"${message}": too large for the node, refused as sent; its calls are to go in smaller batches`, () => {
      const err = classify(message);
      expect(err).to.be.instanceOf(ExhaustsResources);
      expect((err as SubmissionRejected).mayStillLand).to.equal(false);
    });
  }

  it('another 1010 is not a batch too large', () => {
    expect(classify('1010: Invalid Transaction: Transaction is outdated')).not.to.be.instanceOf(ExhaustsResources);
    expect(classify('1010: Invalid Transaction: Inability to pay some fees (e.g. account balance too low)')).not.to.be.instanceOf(
      ExhaustsResources,
    );
  });

  it('anything else (a connection error) is not a refusal', () => {
    const err = classify('disconnected from ws://127.0.0.1:9944: 1006:: Abnormal Closure');
    expect(err).not.to.be.instanceOf(SubmissionRejected);
  });
});
