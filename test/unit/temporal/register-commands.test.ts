import { searchAttributeCreateCommands } from '../../../temporal/register-commands';

describe('searchAttributeCreateCommands', () => {
  it('names the server and namespace the controller was given, one command per attribute', () => {
    const commands = searchAttributeCreateCommands({ address: 'temporal.prod:7233', namespace: 'prod' });
    expect(commands).toHaveLength(8);
    expect(commands).toContain(
      'temporal operator search-attribute create --address temporal.prod:7233 --namespace prod --name DurableCsiWaitingSince --type Datetime',
    );
  });

  it('passes mTLS settings as the CLI spells them, quoted for the shell', () => {
    const [command] = searchAttributeCreateCommands(
      {
        address: 'x.tmprl.cloud:7233',
        namespace: 'ns.acct',
        tlsCert: '/etc/certs/client.pem',
        tlsKey: "/etc/my certs/o'key.pem",
        tlsCa: '/etc/certs/ca.pem',
        tlsServerName: 'x.tmprl.cloud',
      },
      ['DurableCsiNodeId'],
    );
    expect(command).toBe(
      'temporal operator search-attribute create --address x.tmprl.cloud:7233 --namespace ns.acct --tls ' +
        "--tls-cert-path /etc/certs/client.pem --tls-key-path '/etc/my certs/o'\\''key.pem' " +
        '--tls-ca-path /etc/certs/ca.pem --tls-server-name x.tmprl.cloud --name DurableCsiNodeId --type Keyword',
    );
  });

  it('reads an API key from its file into TEMPORAL_API_KEY, never printing the key', () => {
    const [command] = searchAttributeCreateCommands(
      { address: 'a:7233', namespace: 'n', apiKeyFile: '/run/secrets/temporal key' },
      ['DurableCsiPhase'],
    );
    expect(command).toBe(
      `TEMPORAL_API_KEY="$(cat '/run/secrets/temporal key')" temporal operator search-attribute create ` +
        '--address a:7233 --namespace n --tls --name DurableCsiPhase --type Keyword',
    );
  });

  it('turns TLS on for --temporal-tls alone', () => {
    const [command] = searchAttributeCreateCommands({ address: 'a:7233', namespace: 'n', tls: true }, [
      'DurableCsiPhase',
    ]);
    expect(command).toContain('--namespace n --tls --name');
  });
});
