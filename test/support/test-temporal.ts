import { Connection } from '@temporalio/client';
import { connectionOptions, type TemporalConfig } from '../../common/temporal-config';
import { temporalConfigFlags } from '../../temporal-prod/prod-temporal';

/**
 * Which Temporal server a test process talks to. The `dev` jest project (every suite) runs against the dev server,
 * whose address is DURABLE_CSI_TEST_TEMPORAL; the `prod-temporal` project (the suites in jest.config.js's
 * PROD_SUITES and test/prod/) against the production-style server, whose full connection (mTLS files, server name)
 * is DURABLE_CSI_TEST_TEMPORAL_CONFIG. See docs/temporal-cluster.md.
 */
export const ADDRESS_ENV = 'DURABLE_CSI_TEST_TEMPORAL';
export const CONFIG_ENV = 'DURABLE_CSI_TEST_TEMPORAL_CONFIG';
/** Set by the prod project's global setup; test/support/use-prod-temporal.ts selects it per test file. */
export const PROD_CONFIG_ENV = 'DURABLE_CSI_TEST_PROD_TEMPORAL_CONFIG';

export function testTemporalConfig(): TemporalConfig {
  const config = process.env[CONFIG_ENV];
  if (config) return JSON.parse(config) as TemporalConfig;
  const address = process.env[ADDRESS_ENV];
  if (!address) throw new Error(`${ADDRESS_ENV} is not set: run the tests through jest (global-setup)`);
  return { address, namespace: 'default' };
}

/** 'prod' when the suite runs against the production-style server. */
export function testTemporalKind(): 'dev' | 'prod' {
  return process.env[CONFIG_ENV] ? 'prod' : 'dev';
}

/** The driver's Temporal flags for the test server (address, namespace and, for prod, the mTLS flags). */
export function testTemporalFlags(namespace?: string): string[] {
  const config = testTemporalConfig();
  return temporalConfigFlags(namespace ? { ...config, namespace } : config);
}

export function connectTestTemporal(): Promise<Connection> {
  return Connection.connect(connectionOptions(testTemporalConfig()));
}
