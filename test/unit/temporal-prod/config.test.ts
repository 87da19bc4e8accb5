import { Command } from 'commander';
import { addTemporalOptions, temporalConfig, type TemporalFlags } from '../../../cli/temporal-options';
import type { TemporalConfig } from '../../../temporal/config';
import { searchAttributeCreateCommands } from '../../../temporal/register-commands';
import { SEARCH_ATTRIBUTES } from '../../../temporal/search-attributes';
import { temporalConfigFlags } from '../../temporal-prod/prod-temporal';
import { renderDynamicConfig, renderServerConfig, SERVICES } from '../../temporal-prod/server-config';
import * as keys from '../../../common/names';

const FULL: TemporalConfig = {
  address: '127.0.0.1:7233',
  namespace: 'ns',
  tls: true,
  tlsCa: '/c/ca.pem',
  tlsCert: '/c/client.pem',
  tlsKey: '/c/client-key.pem',
  tlsServerName: 'frontend.test',
  apiKeyFile: '/c/key',
};

describe('production-style Temporal configuration', () => {
  it('turns a connection into the README flags and back without loss', () => {
    const command = addTemporalOptions(new Command('x')).exitOverride();
    command.parse(temporalConfigFlags(FULL), { from: 'user' });
    expect(temporalConfig(command.opts<TemporalFlags>())).toEqual(FULL);
  });

  it('registers every search attribute key the workflows define, with its type', () => {
    // Search attribute keys are typed KEYWORD, DATETIME, ...; signal and update definitions share their module.
    const defined = Object.values(keys).filter(
      (value) => typeof value === 'object' && value !== null && 'name' in value && /^[A-Z_]+$/.test(String(value.type)),
    );
    expect(Object.keys(SEARCH_ATTRIBUTES).sort()).toEqual(defined.map((key) => (key as { name: string }).name).sort());
    expect(SEARCH_ATTRIBUTES.DurableCsiWaitingSince).toBe('Datetime');
    expect(searchAttributeCreateCommands(FULL)).toHaveLength(defined.length);
  });

  it('binds every service to loopback with membership ports a smallint column can hold', () => {
    const ports = Object.fromEntries(
      SERVICES.map((name, index) => [name, { grpc: 40000 + index, membership: 20000 + index }]),
    );
    const config = JSON.parse(
      renderServerConfig({
        ports: {
          ...(ports as Record<(typeof SERVICES)[number], { grpc: number; membership: number }>),
          frontendHttp: 41000,
        },
        postgres: { port: 5432, user: 'temporal', password: 'pw' },
        numHistoryShards: 4,
        dynamicConfigFile: '/d.yaml',
      }),
    ) as { services: Record<string, { rpc: { bindOnLocalHost: boolean; membershipPort: number } }>; global: object };
    for (const name of SERVICES) {
      expect(config.services[name]?.rpc.bindOnLocalHost).toBe(true);
      expect(config.services[name]?.rpc.membershipPort).toBeLessThan(32768);
    }
    expect(config.global).not.toHaveProperty('tls');
    expect(JSON.parse(renderDynamicConfig())).toHaveProperty(['history.retentionTimerJitterDuration']);
  });
});
