/**
 * The demo service's knobs: flags, else environment variables, else defaults. Bad values are
 * rejected with what was expected and what came.
 */
import { isIP } from 'node:net';
import { parseArgs } from 'node:util';
import { defaultAllowedHosts, parseAllowedHost } from './http/hosts.ts';

export const SCENARIOS = [
  'converge',
  'slow',
  'lagging',
  'never',
  'timeout',
  'fail',
  'abort',
  'approval',
] as const;
export type Scenario = (typeof SCENARIOS)[number];

export interface ServiceConfig {
  readonly host: string;
  readonly port: number;
  /** Most conversations running at once. */
  readonly concurrency: number;
  /** Conversations started per second (while under `concurrency`). */
  readonly rate: number;
  /** Desks per conversation (2-8). */
  readonly desks: number;
  /** Spread within which desks count as agreeing on a price. */
  readonly tolerance: number;
  /** Mean responder latency in milliseconds. */
  readonly latencyMs: number;
  /** Relative weights of the scenarios. */
  readonly mix: Readonly<Record<Scenario, number>>;
  /** Seconds between progress lines. */
  readonly progressSeconds: number;
  /** The share of the conversations that went well whose traces are kept (0-1). */
  readonly sampleRatio: number;
  /** Keep the trace of every conversation slower than this, ms; 0: no such rule. */
  readonly sampleSlowMs: number;
  /** Keep the trace of every conversation with more dispatches than this; 0: no such rule. */
  readonly sampleLongDispatches: number;
  /** Most WebSocket clients at once; past it an upgrade is refused with 503. */
  readonly maxClients: number;
  /** Most WebSocket clients from one remote address; past it an upgrade is refused with 503. */
  readonly maxClientsPerAddress: number;
  /** Seconds between WebSocket pings; a client that has not answered the last one is dropped. */
  readonly wsPingSeconds: number;
  /** Longest wait for a request's headers (also for a connection that sends nothing), ms. */
  readonly headersTimeoutMs: number;
  /** Longest wait for a whole request, ms (at least `headersTimeoutMs`). */
  readonly requestTimeoutMs: number;
  /** How long an idle keep-alive connection stays open after a response, ms. */
  readonly keepAliveTimeoutMs: number;
  /** Longest wait at shutdown for spans to reach the OTLP endpoint, ms. */
  readonly flushTimeoutMs: number;
  /** Directory to record every conversation into (rotating NDJSON files), or undefined. */
  readonly record: string | undefined;
  /** Size of one recording file, MiB. */
  readonly recordFileMb: number;
  /** Recording files kept; the oldest is deleted past it. */
  readonly recordFiles: number;
  /**
   * The host names the service answers for (Host, and a WebSocket's Origin); IP-literal hosts
   * always pass. Entries are names, `.suffix` names (the name and every name under it) or IPs.
   */
  readonly allowedHosts: readonly string[];
  /**
   * A trace UI's URL with `{traceId}` where the trace id goes, for the live page's links; none:
   * no links.
   */
  readonly traceUrl: string | undefined;
  /** The directory of the default SQLite store (created if missing). */
  readonly data: string;
  /**
   * Where conversations are kept: `memory`, `sqlite:PATH`, a `postgres://` or `redis://` URL;
   * undefined: the SQLite file `conversations.db` under `data`.
   */
  readonly store: string | undefined;
  /** A conversation waiting for approval longer than this, seconds, is rejected. */
  readonly approvalTimeoutSeconds: number;
  /**
   * Fleet mode: the Redis of the BullMQ queue (and the store, unless `store` names another). Set
   * without `workers`, the service is the producer and page of workers that run elsewhere.
   */
  readonly redis: string | undefined;
  /** Fleet mode: worker processes to spawn (0: the single-process service). */
  readonly workers: number;
}

interface Knob {
  readonly flag: string;
  readonly env: string;
  readonly fallback: string;
  readonly help: string;
  /** What --help says the default is, when `fallback` alone does not say it. */
  readonly shown?: string;
}

const KNOBS = {
  host: {
    flag: 'host',
    env: 'HOST',
    fallback: '127.0.0.1',
    help: 'address to listen on (0.0.0.0 in a container)',
  },
  port: {
    flag: 'port',
    env: 'PORT',
    fallback: '9464',
    help: 'port of /, /metrics, /healthz and /ws (0: any free port)',
  },
  concurrency: {
    flag: 'concurrency',
    env: 'CONCURRENCY',
    fallback: '16',
    help: 'most conversations running at once',
  },
  rate: { flag: 'rate', env: 'RATE', fallback: '10', help: 'conversations started per second' },
  desks: {
    flag: 'desks',
    env: 'DESKS',
    fallback: '3',
    help: 'trading desks per conversation (2-8)',
  },
  tolerance: {
    flag: 'tolerance',
    env: 'TOLERANCE',
    fallback: '0.05',
    help: 'spread within which the desks agree on a price',
  },
  latencyMs: {
    flag: 'latency-ms',
    env: 'LATENCY_MS',
    fallback: '5',
    help: 'mean desk answer latency, ms',
  },
  mix: {
    flag: 'mix',
    env: 'MIX',
    fallback: 'converge=65,slow=10,lagging=7,never=6,timeout=2,fail=5,abort=4,approval=1',
    help: `scenario weights (${SCENARIOS.join(', ')})`,
  },
  progressSeconds: {
    flag: 'progress-s',
    env: 'PROGRESS_S',
    fallback: '2',
    help: 'seconds between progress lines',
  },
  sampleRatio: {
    flag: 'sample-ratio',
    env: 'SAMPLE_RATIO',
    fallback: '0.05',
    help: 'traces kept of conversations that converged (failed, unconverged, slow ones: all)',
  },
  sampleSlowMs: {
    flag: 'sample-slow-ms',
    env: 'SAMPLE_SLOW_MS',
    fallback: '5000',
    help: 'keep every trace of a conversation slower than this (0: no such rule)',
  },
  sampleLongDispatches: {
    flag: 'sample-long-dispatches',
    env: 'SAMPLE_LONG_DISPATCHES',
    fallback: '0',
    help: 'keep every trace of a conversation with more dispatches (0: no such rule)',
  },
  maxClients: {
    flag: 'max-clients',
    env: 'MAX_CLIENTS',
    fallback: '500',
    help: 'most WebSocket clients at once (past it: 503)',
  },
  maxClientsPerAddress: {
    flag: 'max-clients-per-address',
    env: 'MAX_CLIENTS_PER_ADDRESS',
    fallback: '10',
    help: 'most WebSocket clients from one address (past it: 503)',
  },
  wsPingSeconds: {
    flag: 'ws-ping-s',
    env: 'WS_PING_S',
    fallback: '15',
    help: 'seconds between WebSocket pings (silent clients are dropped)',
  },
  headersTimeoutMs: {
    flag: 'headers-timeout-ms',
    env: 'HEADERS_TIMEOUT_MS',
    fallback: '10000',
    help: 'longest wait for request headers (and for a silent connection)',
  },
  requestTimeoutMs: {
    flag: 'request-timeout-ms',
    env: 'REQUEST_TIMEOUT_MS',
    fallback: '30000',
    help: 'longest wait for a whole request',
  },
  keepAliveTimeoutMs: {
    flag: 'keep-alive-timeout-ms',
    env: 'KEEP_ALIVE_TIMEOUT_MS',
    fallback: '5000',
    help: 'idle keep-alive connections close after this',
  },
  flushTimeoutMs: {
    flag: 'flush-timeout-ms',
    env: 'FLUSH_TIMEOUT_MS',
    fallback: '3000',
    help: 'longest wait for the span flush at shutdown',
  },
  record: {
    flag: 'record',
    env: 'RECORD',
    fallback: '',
    shown: 'none',
    help: 'record every conversation into this directory (for conversation-orchestrator replay)',
  },
  recordFileMb: {
    flag: 'record-file-mb',
    env: 'RECORD_FILE_MB',
    fallback: '16',
    help: 'size of one recording file, MiB (then the next file)',
  },
  recordFiles: {
    flag: 'record-files',
    env: 'RECORD_FILES',
    fallback: '8',
    help: 'recording files kept (the oldest is deleted past it)',
  },
  allowedHosts: {
    flag: 'allowed-hosts',
    env: 'ALLOWED_HOSTS',
    fallback: '',
    shown: 'the --host name, localhost, 127.0.0.1, [::1]',
    help: 'host names answered, comma-separated (.example.com: and below; other Host: 421)',
  },
  traceUrl: {
    flag: 'trace-url',
    env: 'TRACE_URL',
    fallback: '',
    shown: 'none (no trace links)',
    help: 'trace UI URL for the live page, {traceId} replaced (http://localhost:16686/trace/{traceId})',
  },
  data: {
    flag: 'data',
    env: 'DATA',
    fallback: '.data',
    shown: '.data (relative to the working directory)',
    help: 'directory of the conversations store (SQLite, created if missing)',
  },
  store: {
    flag: 'store',
    env: 'STORE',
    fallback: '',
    shown: 'sqlite:{--data}/conversations.db (fleet mode: the --redis server)',
    help: 'where conversations are kept: memory, sqlite:PATH, postgres://…, redis://… (fleet mode: redis:// or postgres://)',
  },
  approvalTimeoutSeconds: {
    flag: 'approval-timeout-s',
    env: 'APPROVAL_TIMEOUT_S',
    fallback: '300',
    help: 'seconds a conversation waits for approval before it is rejected',
  },
  redis: {
    flag: 'redis',
    env: 'REDIS_URL',
    fallback: '',
    shown: 'none',
    help: "fleet mode: the work queue's Redis, redis://host:port (workers: --workers or elsewhere)",
  },
  workers: {
    flag: 'workers',
    env: 'WORKERS',
    fallback: '0',
    help: 'fleet mode: BullMQ worker processes to spawn (0: run conversations in this process)',
  },
} as const satisfies Record<keyof ServiceConfig, Knob>;

/** A knob's value and where it came from (the flag, the variable, or the default). */
interface Raw {
  readonly value: string;
  readonly from: string;
  readonly defaulted?: true;
}

export class ConfigError extends Error {
  override name = 'ConfigError';
}

export function usage(): string {
  const rows = Object.values(KNOBS).map(
    (k) =>
      `  --${k.flag.padEnd(22)} ${k.help}\n  ${''.padEnd(24)} env ${k.env}, default ${'shown' in k ? k.shown : k.fallback}`,
  );
  return [
    'conversation-orchestrator demo service: trading desks converging on prices, instrumented.',
    '',
    'Usage: npm start -- [options]',
    '',
    ...rows,
    `  --${'help'.padEnd(22)} this text`,
    '',
    'Serves /metrics (Prometheus text; OpenMetrics with exemplars when asked), /healthz and',
    'a WebSocket at /ws pushing every dispatch. Traces go out over OTLP/HTTP when',
    'OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is set.',
  ].join('\n');
}

export function parseConfig(
  argv: readonly string[],
  env: NodeJS.ProcessEnv,
): ServiceConfig | 'help' {
  let values: Record<string, string | boolean | undefined>;
  let tokens: ReturnType<typeof parseArgs>['tokens'];
  try {
    ({ values, tokens } = parseArgs({
      args: [...argv],
      options: {
        help: { type: 'boolean' },
        ...Object.fromEntries(
          Object.values(KNOBS).map((k) => [k.flag, { type: 'string' as const }]),
        ),
      },
      strict: true,
      tokens: true,
    }));
  } catch (error) {
    throw new ConfigError(`${(error as Error).message}\n\n${usage()}`);
  }
  // parseArgs keeps the last of repeated flags: `--port 80 --port 8080` is a mistake to say.
  const seen = new Map<string, number>();
  for (const token of tokens ?? []) {
    if (token.kind === 'option') seen.set(token.name, (seen.get(token.name) ?? 0) + 1);
  }
  for (const [name, times] of seen) {
    if (times > 1) throw new ConfigError(`Expected --${name} at most once, got it ${times} times`);
  }
  if (values.help === true) return 'help';
  const raw = (key: keyof typeof KNOBS): Raw => {
    const knob: Knob = KNOBS[key];
    const flag = values[knob.flag];
    if (typeof flag === 'string') return { value: flag, from: `--${knob.flag}` };
    const fromEnv = env[knob.env];
    // `PORT=` (an unset compose variable, say) is a mistake, not a request for the default.
    if (fromEnv === '')
      throw new ConfigError(`Expected ${knob.env} to be unset or a value, got an empty string`);
    if (fromEnv !== undefined) return { value: fromEnv, from: knob.env };
    return { value: knob.fallback, from: `--${knob.flag}`, defaulted: true };
  };
  const number = (key: keyof typeof KNOBS, min: number, max: number, integer: boolean): number => {
    const { value, from } = raw(key);
    const n = Number(value);
    if (
      !(integer ? INTEGER : DECIMAL).test(value) ||
      !Number.isFinite(n) ||
      n < min ||
      n > max ||
      (integer && !Number.isInteger(n))
    ) {
      throw new ConfigError(
        `Expected ${from} to be ${integer ? 'an integer' : 'a number'} from ${min} to ${max}, got \`${value}\``,
      );
    }
    return n;
  };
  if (values.data === '') throw new ConfigError('Expected --data to be a directory, got ``');
  if (values.record === '') throw new ConfigError('Expected --record to be a directory, got ``');
  const headersTimeoutMs = number('headersTimeoutMs', 100, 600_000, true);
  const requestTimeoutMs = number('requestTimeoutMs', 100, 3_600_000, true);
  if (requestTimeoutMs < headersTimeoutMs) {
    throw new ConfigError(
      `Expected ${raw('requestTimeoutMs').from} to be at least ${raw('headersTimeoutMs').from} (${headersTimeoutMs}), got \`${requestTimeoutMs}\``,
    );
  }
  const host = parseHost(raw('host'));
  return {
    host,
    port: number('port', 0, 65535, true),
    concurrency: number('concurrency', 1, 10_000, true),
    rate: number('rate', 0.01, 100_000, false),
    desks: number('desks', 2, 8, true),
    tolerance: number('tolerance', 1e-9, 1e6, false),
    latencyMs: number('latencyMs', 0, 60_000, false),
    mix: parseMix(raw('mix')),
    progressSeconds: number('progressSeconds', 0.1, 3600, false),
    sampleRatio: number('sampleRatio', 0, 1, false),
    sampleSlowMs: number('sampleSlowMs', 0, 86_400_000, false),
    sampleLongDispatches: number('sampleLongDispatches', 0, 1_000_000_000, true),
    maxClients: number('maxClients', 0, 100_000, true),
    maxClientsPerAddress: number('maxClientsPerAddress', 1, 100_000, true),
    wsPingSeconds: number('wsPingSeconds', 0.1, 3600, false),
    headersTimeoutMs,
    requestTimeoutMs,
    keepAliveTimeoutMs: number('keepAliveTimeoutMs', 100, 600_000, true),
    flushTimeoutMs: number('flushTimeoutMs', 0, 60_000, true),
    allowedHosts: parseAllowedHosts(raw('allowedHosts'), host),
    traceUrl: parseTraceUrl(raw('traceUrl')),
    record: raw('record').value || undefined,
    recordFileMb: number('recordFileMb', 1, 1024, true),
    recordFiles: number('recordFiles', 1, 1000, true),
    data: raw('data').value,
    store: parseStore(raw('store')),
    approvalTimeoutSeconds: number('approvalTimeoutSeconds', 0.1, 604_800, false),
    ...parseFleet(raw('redis'), number('workers', 0, 64, true), raw('store')),
  };
}

function parseFleet(
  redis: Raw,
  workers: number,
  store: Raw,
): Pick<ServiceConfig, 'redis' | 'workers'> {
  const url = (raw: Raw, schemes: RegExp, example: string): string | undefined => {
    if (raw.defaulted === true) return undefined;
    let ok = false;
    try {
      ok = schemes.test(new URL(raw.value).protocol);
    } catch {}
    if (!ok)
      throw new ConfigError(
        `Expected ${raw.from} to be a URL like ${example}, got \`${clip(raw.value)}\``,
      );
    return raw.value;
  };
  const redisUrl = url(redis, /^rediss?:$/, 'redis://127.0.0.1:6379');
  // Workers in other processes share the store: a server's, not memory or a local SQLite file.
  if (redisUrl !== undefined)
    url(store, /^(rediss?|postgres(ql)?):$/, 'redis://127.0.0.1:6379 or postgres://user@host/db');
  if (workers > 0 && redisUrl === undefined)
    throw new ConfigError(
      `Expected --redis (the work queue's Redis) with --workers ${workers}, got none`,
    );
  return { redis: redisUrl, workers };
}

function parseAllowedHosts({ value, from, defaulted }: Raw, host: string): readonly string[] {
  if (defaulted === true) return defaultAllowedHosts(host);
  const entries = value.split(',').map((entry) => parseAllowedHost(entry));
  if (entries.length > 1000 || entries.some((e) => e === undefined)) {
    throw new ConfigError(
      `Expected ${from} to be comma-separated host names (desks, demo.example.com, .example.com) or IP addresses, got \`${clip(value)}\``,
    );
  }
  return entries as string[];
}

/** `memory`, `sqlite:PATH`, `postgres://…` / `postgresql://…` or `redis://…` / `rediss://…`. */
function parseStore({ value, from, defaulted }: Raw): string | undefined {
  if (defaulted === true) return undefined;
  if (
    value === 'memory' ||
    /^sqlite:.+/.test(value) ||
    /^(postgres|postgresql|redis|rediss):\/\/./.test(value)
  ) {
    return value;
  }
  throw new ConfigError(
    `Expected ${from} to be memory, sqlite:PATH, a postgres:// URL or a redis:// URL, got \`${clip(value)}\``,
  );
}

/** The placeholder a trace URL template must hold, once. */
export const TRACE_ID_PLACEHOLDER = '{traceId}';

function parseTraceUrl({ value, from, defaulted }: Raw): string | undefined {
  if (defaulted === true) return undefined;
  const parts = value.split(TRACE_ID_PLACEHOLDER);
  let ok = parts.length === 2 && value.length <= 2000;
  if (ok) {
    try {
      const url = new URL(parts.join('0123456789abcdef0123456789abcdef'));
      ok = url.protocol === 'http:' || url.protocol === 'https:';
    } catch {
      ok = false;
    }
  }
  if (!ok) {
    throw new ConfigError(
      `Expected ${from} to be an http(s) URL holding ${TRACE_ID_PLACEHOLDER} once (http://localhost:16686/trace/${TRACE_ID_PLACEHOLDER}), got \`${clip(value)}\``,
    );
  }
  return value;
}

/** A bad value is shown in an error, but not 10,000 characters of it. */
function clip(value: string): string {
  return value.length <= 200 ? value : `${value.slice(0, 200)}… (${value.length} characters)`;
}

/**
 * Plain decimal notation only: `Number()` alone would also take `0x10`, `0b1`, `0o7`, ` 5 ` and
 * `1e3`, which nobody means in a config value.
 */
const DECIMAL = /^(\d+(\.\d+)?|\.\d+)$/;
/** An integer knob takes digits only (`16.0` is refused like `16.5`). */
const INTEGER = /^\d+$/;
/**
 * A host whose last label is a number (`127.1`, `0x7f.1`, `1.2.3.0x4`) is an IPv4 address to a URL
 * parser and to inet_aton, never a DNS name: only dotted-decimal IPv4 is taken for one.
 */
const NUMERIC_LAST_LABEL = /^(0x[\da-f]*|\d+)$/i;

/** A DNS name label: letters, digits and inner hyphens, at most 63 characters. */
const LABEL = /^[a-z\d]([a-z\d-]{0,61}[a-z\d])?$/i;

/**
 * An IP address, or a host name the resolver may look up. A dotted string of digits must be a
 * valid IPv4 address (`999.1.1.1` is not a name either), and a name must have DNS syntax.
 */
function parseHost({ value, from }: { value: string; from: string }): string {
  if (isIP(value) !== 0) return value;
  const labels = value.replace(/\.$/, '').split('.');
  const looksNumeric = NUMERIC_LAST_LABEL.test(labels[labels.length - 1] ?? '');
  if (!looksNumeric && value.length <= 253 && labels.every((l) => LABEL.test(l))) return value;
  throw new ConfigError(
    `Expected ${from} to be an IP address (0.0.0.0, 127.0.0.1, ::) or a host name, got \`${value}\``,
  );
}

function parseMix({ value, from }: { value: string; from: string }): Record<Scenario, number> {
  const mix = Object.fromEntries(SCENARIOS.map((s) => [s, 0])) as Record<Scenario, number>;
  for (const part of value.split(',')) {
    const [name, weight] = part.split('=').map((x) => x.trim());
    const w = Number(weight);
    if (
      !SCENARIOS.includes(name as Scenario) ||
      weight === undefined ||
      !DECIMAL.test(weight) ||
      !Number.isFinite(w) ||
      w < 0
    ) {
      throw new ConfigError(
        `Expected ${from} to be scenario=weight pairs (scenarios: ${SCENARIOS.join(', ')}; weights >= 0), got \`${value}\``,
      );
    }
    mix[name as Scenario] = w;
  }
  if (Object.values(mix).every((w) => w === 0)) {
    throw new ConfigError(
      `Expected ${from} to give at least one scenario a weight above 0, got \`${value}\``,
    );
  }
  return mix;
}
