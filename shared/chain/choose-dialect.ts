import type { ApiPromise } from '@polkadot/api';
import type { RegistryDialect } from './dialect';
import { atsDialect } from './dialects/ats';
import { remarkDialect } from './dialects/remark';

/** `ats` when the runtime has the ATS pallet's `createOnBehalf`, else `remark`. */
export function chooseDialect(api: ApiPromise): RegistryDialect {
  const hasAts = typeof (api.tx as unknown as Record<string, Record<string, unknown> | undefined>).ats?.createOnBehalf === 'function';
  return hasAts ? atsDialect : remarkDialect;
}
