import { Connection } from '@temporalio/client';
import { connectionOptions, type TemporalConfig } from '../../temporal/config';
import { temporalConfigFlags } from '../temporal-prod/prod-temporal';

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

/**
 * Points this test process, and every process it starts after, at another dev server than jest's (a suite that
 * kills its own server); returns what sets it back, for afterAll.
 */
export function useOwnTemporal(address: string): () => void {
  const saved = { address: process.env[ADDRESS_ENV], config: process.env[CONFIG_ENV] };
  process.env[ADDRESS_ENV] = address;
  delete process.env[CONFIG_ENV];
  return () => {
    if (saved.address === undefined) delete process.env[ADDRESS_ENV];
    else process.env[ADDRESS_ENV] = saved.address;
    if (saved.config !== undefined) process.env[CONFIG_ENV] = saved.config;
  };
}

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

/**
 * A client in the test process. grpc-js reads GRPC_DEFAULT_SSL_ROOTS_FILE_PATH once, when it loads, so roots a test
 * sets there later for the processes it starts are passed explicitly here.
 */
export function connectTestTemporal(): Promise<Connection> {
  const config = testTemporalConfig();
  const roots = process.env.GRPC_DEFAULT_SSL_ROOTS_FILE_PATH;
  const tlsCa = config.tls && !config.tlsCa && roots ? roots : config.tlsCa;
  return Connection.connect(connectionOptions({ ...config, tlsCa }));
}
