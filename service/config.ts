/**
 * The demo service's knobs: flags, else environment variables, else defaults. Bad values are
 * rejected with what was expected and what came.
 */
import { parseArgs } from 'node:util';

export const SCENARIOS = ['converge', 'slow', 'never', 'timeout', 'fail', 'abort'] as const;
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
}

interface Knob {
  readonly flag: string;
  readonly env: string;
  readonly fallback: string;
  readonly help: string;
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
    help: 'port of /metrics, /healthz and /ws (0: any free port)',
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
    fallback: 'converge=70,slow=10,never=6,timeout=5,fail=5,abort=4',
    help: `scenario weights (${SCENARIOS.join(', ')})`,
  },
  progressSeconds: {
    flag: 'progress-s',
    env: 'PROGRESS_S',
    fallback: '2',
    help: 'seconds between progress lines',
  },
} as const satisfies Record<keyof ServiceConfig, Knob>;

export class ConfigError extends Error {
  override name = 'ConfigError';
}

export function usage(): string {
  const rows = Object.values(KNOBS).map(
    (k) =>
      `  --${k.flag.padEnd(13)} ${k.help}\n  ${''.padEnd(15)} env ${k.env}, default ${k.fallback}`,
  );
  return [
    'conversation-orchestrator demo service: trading desks converging on prices, instrumented.',
    '',
    'Usage: npm start -- [options]',
    '',
    ...rows,
    '  --help          this text',
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
  try {
    ({ values } = parseArgs({
      args: [...argv],
      options: {
        help: { type: 'boolean' },
        ...Object.fromEntries(
          Object.values(KNOBS).map((k) => [k.flag, { type: 'string' as const }]),
        ),
      },
      strict: true,
    }));
  } catch (error) {
    throw new ConfigError(`${(error as Error).message}\n\n${usage()}`);
  }
  if (values.help === true) return 'help';
  const raw = (key: keyof typeof KNOBS): { value: string; from: string } => {
    const knob: Knob = KNOBS[key];
    const flag = values[knob.flag];
    if (typeof flag === 'string') return { value: flag, from: `--${knob.flag}` };
    const fromEnv = env[knob.env];
    if (fromEnv !== undefined && fromEnv !== '') return { value: fromEnv, from: knob.env };
    return { value: knob.fallback, from: `--${knob.flag}` };
  };
  const number = (key: keyof typeof KNOBS, min: number, max: number, integer: boolean): number => {
    const { value, from } = raw(key);
    const n = Number(value);
    if (
      value.trim() === '' ||
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
  const host = raw('host').value;
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
  };
}

function parseMix({ value, from }: { value: string; from: string }): Record<Scenario, number> {
  const mix = Object.fromEntries(SCENARIOS.map((s) => [s, 0])) as Record<Scenario, number>;
  for (const part of value.split(',')) {
    const [name, weight] = part.split('=').map((x) => x.trim());
    const w = Number(weight);
    if (
      !SCENARIOS.includes(name as Scenario) ||
      weight === undefined ||
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
