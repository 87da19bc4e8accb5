/**
 * host:port of an HTTP listener (metrics, probes). An empty host is every interface; an IPv6 host may be bracketed
 * ([fd00::1]:9464) or bare (fd00::1:9464, what `$(POD_IP):9464` gives in an IPv6 Pod): the port is after the last
 * colon either way.
 */
export function parseListenAddress(address: string, what: string): { host: string; port: number } {
  const match = /^(.*):(\d+)$/.exec(address);
  const port = Number(match?.[2]);
  if (!match || port > 65535) throw new Error(`${what} address "${address}" is not host:port`);
  const host = (match[1] ?? '').replace(/^\[(.*)\]$/, '$1');
  return { host: host || '0.0.0.0', port };
}
