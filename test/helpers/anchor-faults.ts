import { AnchorService } from '../../shared/chain/anchors';

/** Fault injection: the worker dies after signing and storing the batch, before its bytes reach the node. */
export class DiesBeforeSending extends AnchorService {
  override async submit(): Promise<never> {
    throw new Error('worker died before sending');
  }
}
