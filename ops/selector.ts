/**
 * The config's selector as matchers, and the target labels the Kubernetes ServiceMonitor gives
 * every replica. The selector is applied to `up{…}` and to every metric, so it may only name
 * target labels, and the manifests must produce labels it selects: both are checked here, at
 * config time, so a variant whose rules and dashboards would match nothing is refused.
 */

export type MatchOp = '=' | '!=' | '=~' | '!~';

export interface Matcher {
  readonly label: string;
  readonly op: MatchOp;
  /** The value as PromQL reads it (escapes resolved). */
  readonly value: string;
  /** The matcher as written. */
  readonly text: string;
}

const MATCHER = /([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\\n\r]|\\.)*)"/g;

/**
 * The matchers of a selector the config's MATCHERS pattern accepted. Throws a message (without
 * the `Expected` prefix's subject) when a value does not unquote or a regex does not compile.
 */
export function parseSelector(selector: string): Matcher[] {
  return [...selector.matchAll(MATCHER)].map((m) => {
    const [text, label, op, raw] = m as unknown as [string, string, MatchOp, string];
    let value: string;
    try {
      // PromQL's double-quoted strings follow Go's escapes; JSON's are the same for \\ \" \n \t
      // \uXXXX and refuse what Go refuses too (such as `\.`, which must be written `\\.`).
      value = JSON.parse(`"${raw}"`) as string;
    } catch {
      throw new SelectorError(
        text,
        'a string with valid escapes (write `\\\\.` for a literal dot)',
      );
    }
    if (op === '=~' || op === '!~') {
      try {
        anchored(value);
      } catch {
        throw new SelectorError(text, 'a regular expression that compiles');
      }
    }
    return { label, op, value, text };
  });
}

export class SelectorError extends Error {
  constructor(
    readonly matcher: string,
    readonly expected: string,
  ) {
    super(`Expected \`${matcher}\` to be ${expected}`);
  }
}

/**
 * A PromQL regex matcher as a JS RegExp, anchored at both ends as PromQL anchors them. PromQL
 * regexes are RE2: a leading flag group such as `(?i)` becomes the JS flag, and what RE2 lacks
 * (lookaround, backreferences) is refused even though JS would compile it.
 */
function anchored(pattern: string): RegExp {
  if (/\(\?<?[=!]|\\[1-9]/.test(pattern))
    throw new SyntaxError('RE2 has no lookaround or backreferences');
  const flags = /^\(\?([imsU]+)\)/.exec(pattern);
  const body = flags ? pattern.slice(flags[0].length) : pattern;
  const jsFlags = [...new Set(flags?.[1]?.replace(/[mU]/g, '') ?? '')].join('');
  return new RegExp(`^(?:${body})$`, jsFlags);
}

/** Whether a label set (a missing label reads as empty, as in PromQL) satisfies a matcher. */
export function matches(m: Matcher, labels: Readonly<Record<string, string>>): boolean {
  const v = labels[m.label] ?? '';
  switch (m.op) {
    case '=':
      return v === m.value;
    case '!=':
      return v !== m.value;
    case '=~':
      return anchored(m.value).test(v);
    case '!~':
      return !anchored(m.value).test(v);
  }
}

/**
 * Labels the service's metrics carry and the rules set or aggregate by themselves: a group label
 * cannot be one of them.
 */
export const RULE_LABELS = [
  'orchestrator',
  'responder',
  'reason',
  'le',
  'quantile',
  'store',
  'cause',
  'queue',
  'state',
];

/** Labels only a metric can carry, never `up`: a selector naming them would select no target. */
export const METRIC_ONLY_LABELS = ['__name__', ...RULE_LABELS];

/** Labels that differ per replica: the manifests cannot set them to a constant. */
export const PER_REPLICA_LABELS = ['instance', 'pod'];

/**
 * The Service's name. The Prometheus Operator names the scrape job after the Service; a selector
 * with another `job="…"` gets a relabeling that sets it.
 */
export const SERVICE_NAME = 'conversation-orchestrator';
export const PORT_NAME = 'http';
export const CONTAINER_NAME = 'service';

export interface ScrapeLabels {
  /** What the ServiceMonitor endpoint's `relabelings` set: one per `label="value"` matcher. */
  readonly relabelings: readonly { action: 'replace'; targetLabel: string; replacement: string }[];
  /** The labels every replica's target then has, besides `instance` and `pod`. */
  readonly labels: Readonly<Record<string, string>>;
}

/** The first matcher the manifests' targets cannot satisfy, with the labels they would carry. */
export function unreachableMatcher(
  matchers: readonly Matcher[],
  namespace: string,
): { matcher: Matcher; labels: Readonly<Record<string, string>> } | undefined {
  const { labels } = scrapeLabels(matchers, namespace);
  for (const matcher of matchers) {
    if (PER_REPLICA_LABELS.includes(matcher.label) || !matches(matcher, labels)) {
      return { matcher, labels };
    }
  }
  return undefined;
}

/**
 * The target labels the ServiceMonitor yields: the Operator's own (`job` after the Service,
 * `namespace`, `service`, `endpoint`, `container`), then a fixed value for each equality matcher
 * of the selector, set by a relabeling (the Operator applies an endpoint's relabelings after its
 * own, so they win).
 */
export function scrapeLabels(matchers: readonly Matcher[], namespace: string): ScrapeLabels {
  const labels: Record<string, string> = {
    job: SERVICE_NAME,
    namespace,
    service: SERVICE_NAME,
    endpoint: PORT_NAME,
    container: CONTAINER_NAME,
  };
  const relabelings = matchers
    // The namespace is the objects' own (`kubernetes.namespace`) and instance and pod differ per
    // replica: relabeling them to a constant would lie.
    .filter((m) => m.op === '=' && m.label !== 'namespace' && !PER_REPLICA_LABELS.includes(m.label))
    .map((m) => {
      labels[m.label] = m.value;
      return { action: 'replace' as const, targetLabel: m.label, replacement: m.value };
    });
  return { relabelings, labels };
}
