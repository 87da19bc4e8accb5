import { parseListenAddress } from '../../../common/listen-address';

describe('parseListenAddress', () => {
  it.each([
    [':9464', { host: '0.0.0.0', port: 9464 }],
    ['10.244.0.7:9464', { host: '10.244.0.7', port: 9464 }],
    ['[fd00::7]:9464', { host: 'fd00::7', port: 9464 }],
    ['fd00::7:9464', { host: 'fd00::7', port: 9464 }],
  ])('%s', (address, expected) => {
    expect(parseListenAddress(address, 'metrics')).toEqual(expected);
  });

  it.each(['9464', 'host', 'host:99999', '$(POD_IP)'])('refuses %s, naming what it is for', (address) => {
    expect(() => parseListenAddress(address, 'metrics')).toThrow(`metrics address "${address}" is not host:port`);
  });
});
