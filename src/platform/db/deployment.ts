import type { Executor } from './knex.js';

/** This deployment's random id (migrations/20261124000000_key_identity.ts): the signer's store is bound to it. */
export async function readDeploymentId(db: Executor): Promise<string> {
  const row = await db<{ id: string }>('deployment').first('id');
  if (!row) throw new Error('the deployment table has no row: run the migrations');
  return row.id;
}
