/**
 * A real PostgreSQL 15 for tests: a fresh cluster (`initdb`, run as the `postgres` user since
 * initdb refuses root) in a temporary directory that user owns, listening on a free loopback port
 * with its unix socket in that directory, started and stopped with `pg_ctl`. `crash()` is
 * `pg_ctl stop -m immediate` (no checkpoint, no clean shutdown: recovery replays the WAL on the
 * next start); `restart()` starts it again on the same port and data.
 *
 * ```ts
 * const pg = await startPostgres();
 * const store = createPostgresStore({ connectionString: pg.connectionString });
 * await pg.crash();
 * await pg.restart();
 * await pg.stop();
 * ```
 */
import { execFile, execFileSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { stopAtExit } from './leftovers.ts';
import { freePort } from './prometheus.ts';

const run = promisify(execFile);
export const POSTGRES_BIN = '/usr/lib/postgresql/15/bin';

export interface PostgresOptions {
  /**
   * When given, TCP connections need this password (scram-sha-256) for the user `postgres`;
   * otherwise they are trusted.
   */
  readonly password?: string;
  /** More `-c name=value` settings for the server. */
  readonly settings?: Readonly<Record<string, string>>;
}

export interface RunningPostgres {
  /** `postgres://postgres[:password]@127.0.0.1:port/postgres`. */
  readonly connectionString: string;
  readonly port: number;
  /** Its own temporary directory (data, socket, log), removed by `stop()`. */
  readonly dir: string;
  /** The server log so far. */
  log(): string;
  /** `pg_ctl stop -m immediate`: the server stops at once, as in a crash. */
  crash(): Promise<void>;
  /** Starts the server again on the same port and data; waits until it accepts connections. */
  restart(): Promise<void>;
  /** Stops the server (`-m fast`) and removes its directory; safe to call twice. */
  stop(): Promise<void>;
}

/** Whether this machine has PostgreSQL 15 (tests and bench rows skip without it). */
export function hasPostgres(): boolean {
  return existsSync(join(POSTGRES_BIN, 'initdb')) && existsSync(join(POSTGRES_BIN, 'pg_ctl'));
}

async function asPostgres(command: string, args: readonly string[]): Promise<string> {
  try {
    const { stdout } = await run(
      'runuser',
      ['-u', 'postgres', '--', join(POSTGRES_BIN, command), ...args],
      { maxBuffer: 16 * 1024 * 1024 },
    );
    return stdout;
  } catch (error) {
    const e = error as { stderr?: string; stdout?: string; message: string };
    throw new Error(
      `${command} ${args.join(' ')} failed: ${e.message}\n${e.stdout ?? ''}${e.stderr ?? ''}`,
    );
  }
}

export async function startPostgres(options: PostgresOptions = {}): Promise<RunningPostgres> {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'co-postgres-'));
  const { uid, gid } = await postgresIds();
  chownSync(dir, uid, gid);
  const data = join(dir, 'data');
  const logFile = join(dir, 'server.log');
  const initdb = ['-D', data, '-U', 'postgres', '--no-sync', '-E', 'UTF8', '--locale=C'];
  if (options.password !== undefined) {
    const pwfile = join(dir, 'pw');
    writeFileSync(pwfile, options.password);
    chownSync(pwfile, uid, gid);
    initdb.push('--auth-local=trust', '--auth-host=scram-sha-256', `--pwfile=${pwfile}`);
  } else {
    initdb.push('--auth=trust');
  }
  const settings = {
    listen_addresses: '127.0.0.1',
    port: String(port),
    unix_socket_directories: dir,
    fsync: 'on',
    ...options.settings,
  };
  const serverOptions = Object.entries(settings)
    .map(([k, v]) => `-c ${k}=${v}`)
    .join(' ');
  const start = () =>
    asPostgres('pg_ctl', [
      '-D',
      data,
      '-l',
      logFile,
      '-o',
      serverOptions,
      '-w',
      '-t',
      '60',
      'start',
    ]);
  const running = () => existsSync(join(data, 'postmaster.pid'));
  // pg_ctl daemonizes the server: stop it at exit if the test did not.
  const forget = stopAtExit(() => {
    if (running()) {
      execFileSync(
        'runuser',
        [
          '-u',
          'postgres',
          '--',
          join(POSTGRES_BIN, 'pg_ctl'),
          '-D',
          data,
          '-m',
          'immediate',
          '-w',
          'stop',
        ],
        { stdio: 'ignore' },
      );
    }
  });
  try {
    await asPostgres('initdb', initdb);
    await start();
  } catch (error) {
    forget();
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }
  const auth = options.password === undefined ? '' : `:${encodeURIComponent(options.password)}`;
  return {
    connectionString: `postgres://postgres${auth}@127.0.0.1:${port}/postgres`,
    port,
    dir,
    log: () => (existsSync(logFile) ? readFileSync(logFile, 'utf8') : ''),
    crash: async () => {
      await asPostgres('pg_ctl', ['-D', data, '-m', 'immediate', '-w', 'stop']);
    },
    restart: async () => {
      if (running()) await asPostgres('pg_ctl', ['-D', data, '-m', 'immediate', '-w', 'stop']);
      await start();
    },
    stop: async () => {
      if (existsSync(data) && running()) {
        await asPostgres('pg_ctl', ['-D', data, '-m', 'fast', '-w', 'stop']).catch(() => {});
      }
      forget();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

async function postgresIds(): Promise<{ uid: number; gid: number }> {
  const { stdout: uid } = await run('id', ['-u', 'postgres']);
  const { stdout: gid } = await run('id', ['-g', 'postgres']);
  return { uid: Number(uid.trim()), gid: Number(gid.trim()) };
}
