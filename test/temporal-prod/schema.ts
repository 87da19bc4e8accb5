import path from 'node:path';
import { runChecked } from '../../common/run-process';
import type { InstalledServer } from './installed-server';
import type { Postgres } from './postgres';

/** Temporal's two databases and the schema directory (under schema/postgresql/v12) each one is set up from. */
const DATABASES = [
  { name: 'temporal', schema: 'temporal' },
  { name: 'temporal_visibility', schema: 'visibility' },
] as const;

/**
 * What an operator does before the first start (docs/temporal-cluster.md): create each database, set up the base
 * schema, then apply every versioned migration, all with temporal-sql-tool. The password travels in SQL_PASSWORD,
 * not on the command line.
 */
export async function setUpSchemas(installed: InstalledServer, postgres: Postgres): Promise<void> {
  for (const database of DATABASES) {
    const env = {
      ...process.env,
      SQL_PLUGIN: 'postgres12',
      SQL_HOST: '127.0.0.1',
      SQL_PORT: String(postgres.port),
      SQL_USER: postgres.user,
      SQL_PASSWORD: postgres.password,
      SQL_DATABASE: database.name,
    };
    const versioned = path.join(installed.schemaDir, database.schema, 'versioned');
    await runChecked(installed.sqlTool, ['create-database'], { env });
    await runChecked(installed.sqlTool, ['setup-schema', '-v', '0.0'], { env });
    await runChecked(installed.sqlTool, ['update-schema', '-d', versioned], { env });
  }
}
