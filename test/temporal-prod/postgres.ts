import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { runChecked } from '../../common/run-process';

/** A PostgreSQL cluster of its own (initdb), listening on 127.0.0.1 only, with a password-protected superuser. */
export interface Postgres {
  port: number;
  user: string;
  password: string;
  /** Where the cluster and its log live; removed by destroy(). */
  dir: string;
  logFile: string;
  running: boolean;
  /** `pg_ctl start -w`: returns once it accepts connections. */
  start(): Promise<void>;
  /** `pg_ctl stop -m fast -w`: open connections are cut, as a crashed or restarted database would cut them. */
  stop(): Promise<void>;
  /** Stops it and removes its directory. */
  destroy(): Promise<void>;
}

const USER = 'temporal';

/** Debian's server binaries (apt-get install postgresql): PG_BINDIR, else the newest /usr/lib/postgresql/<v>/bin. */
export function postgresBinDir(): string {
  const fromEnv = process.env.PG_BINDIR;
  if (fromEnv) return fromEnv;
  const base = '/usr/lib/postgresql';
  const versions = fs.existsSync(base)
    ? fs
        .readdirSync(base)
        .filter((v) => fs.existsSync(path.join(base, v, 'bin', 'initdb')))
        .sort((a, b) => Number(b) - Number(a))
    : [];
  if (versions[0] === undefined) {
    throw new Error(
      'PostgreSQL server binaries not found (no /usr/lib/postgresql/<version>/bin/initdb, PG_BINDIR unset).\n' +
        '  Install them with `apt-get install postgresql` (.ci/run does it); the production-style Temporal needs them.',
    );
  }
  return path.join(base, versions[0], 'bin');
}

/**
 * initdb (as the postgres user when we are root: PostgreSQL refuses to run as root) into a fresh directory under
 * the system temp dir, which that user can reach, then starts it on `port`.
 */
export async function startPostgres(port: number): Promise<Postgres> {
  const bin = postgresBinDir();
  const asRoot = process.getuid?.() === 0;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dcsi-pg-'));
  const data = path.join(dir, 'data');
  const logFile = path.join(dir, 'postgres.log');
  const password = `pw-${Math.random().toString(36).slice(2)}`;
  fs.writeFileSync(path.join(dir, 'pwfile'), `${password}\n`, { mode: 0o600 });
  if (asRoot) await run('chown', ['-R', 'postgres:postgres', dir]);
  const as = (command: string, args: string[]) =>
    asRoot ? run('runuser', ['-u', 'postgres', '--', command, ...args]) : run(command, args);

  await as(path.join(bin, 'initdb'), [
    '-D',
    data,
    '-U',
    USER,
    `--pwfile=${path.join(dir, 'pwfile')}`,
    '--auth=scram-sha-256',
    '-E',
    'UTF8',
    '--locale=C',
  ]);
  fs.rmSync(path.join(dir, 'pwfile'));
  // TCP on loopback only, no unix socket (its default directory is not ours); Temporal's four services each keep a
  // pool of connections, more than the default 100 in total.
  const serverOptions = `-c listen_addresses=127.0.0.1 -p ${port} -c unix_socket_directories= -c max_connections=300`;
  const postgres: Postgres = {
    port,
    user: USER,
    password,
    dir,
    logFile,
    running: false,
    async start() {
      await as(path.join(bin, 'pg_ctl'), ['-D', data, '-l', logFile, '-o', serverOptions, '-w', '-t', '60', 'start']);
      postgres.running = true;
    },
    async stop() {
      await as(path.join(bin, 'pg_ctl'), ['-D', data, '-m', 'fast', '-w', '-t', '60', 'stop']);
      postgres.running = false;
    },
    async destroy() {
      if (fs.existsSync(path.join(data, 'postmaster.pid'))) await postgres.stop().catch(() => undefined);
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
  await postgres.start();
  return postgres;
}

async function run(command: string, args: string[]): Promise<void> {
  await runChecked(command, args);
}
