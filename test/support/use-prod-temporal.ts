import { ADDRESS_ENV, CONFIG_ENV, PROD_CONFIG_ENV } from './test-temporal';
import type { TemporalConfig } from '../../temporal/config';

/**
 * setupFiles of the `prod-temporal` jest project: points this test file at the production-style server. Jest gives
 * every test file its own copy of process.env, so the `dev` project's files keep the dev server.
 */
const config = process.env[PROD_CONFIG_ENV];
if (!config) throw new Error(`${PROD_CONFIG_ENV} is not set: the prod-temporal global setup did not run`);
process.env[CONFIG_ENV] = config;
process.env[ADDRESS_ENV] = (JSON.parse(config) as TemporalConfig).address;
