/**
 * KEDA's `ScaledObject` (keda.sh/v1alpha1), typed, with a `validate()` like kubernetes-models'
 * (which has no KEDA model). The fields and rules are KEDA's CRD as its docs state them
 * (https://keda.sh/docs/2.16/reference/scaledobject-spec/ and the Redis Lists scaler page):
 * `scaleTargetRef.name` and `triggers` (each a `type` and string-valued `metadata`) required;
 * replica counts and periods non-negative integers; `metricType` one of AverageValue, Value,
 * Utilization; the `redis` trigger needs `listName`, `listLength` and an address.
 */

export interface ScaleTargetRef {
  /** @default 'apps/v1' */
  readonly apiVersion?: string;
  /** @default 'Deployment' */
  readonly kind?: string;
  readonly name: string;
  readonly envSourceContainerName?: string;
}

export interface ScaleTrigger {
  readonly type: string;
  readonly name?: string;
  /** KEDA reads every metadata value as a string (`listLength: "100"`). */
  readonly metadata: Readonly<Record<string, string>>;
  readonly metricType?: 'AverageValue' | 'Value' | 'Utilization';
  readonly authenticationRef?: { readonly name: string; readonly kind?: string };
}

export interface ScaledObjectSpec {
  readonly scaleTargetRef: ScaleTargetRef;
  /** Seconds between checks of each trigger. @default 30 */
  readonly pollingInterval?: number;
  /** Seconds after the last active trigger before scaling to zero. @default 300 */
  readonly cooldownPeriod?: number;
  /** @default 0 */
  readonly minReplicaCount?: number;
  /** @default 100 */
  readonly maxReplicaCount?: number;
  readonly fallback?: { readonly failureThreshold: number; readonly replicas: number };
  readonly triggers: readonly ScaleTrigger[];
}

export interface ScaledObjectData {
  readonly apiVersion?: 'keda.sh/v1alpha1';
  readonly kind?: 'ScaledObject';
  readonly metadata: {
    readonly name: string;
    readonly namespace?: string;
    readonly labels?: Readonly<Record<string, string>>;
    readonly annotations?: Readonly<Record<string, string>>;
  };
  readonly spec: ScaledObjectSpec;
}

export class ScaledObjectError extends Error {
  override name = 'ScaledObjectError';
}

function fail(path: string, expected: string, got: unknown): never {
  throw new ScaledObjectError(`Expected ${path} to be ${expected}, got ${JSON.stringify(got)}`);
}

const METRIC_TYPES = ['AverageValue', 'Value', 'Utilization'];
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/;

/** A KEDA ScaledObject: `toJSON()` for the manifest, `validate()` against the CRD's rules. */
export class ScaledObject {
  readonly #data: ScaledObjectData;

  constructor(data: ScaledObjectData) {
    this.#data = data;
  }

  toJSON(): unknown {
    return { apiVersion: 'keda.sh/v1alpha1', kind: 'ScaledObject', ...this.#data };
  }

  validate(): void {
    const d = this.toJSON() as ScaledObjectData & { apiVersion: unknown; kind: unknown };
    if (d.apiVersion !== 'keda.sh/v1alpha1') fail('apiVersion', "'keda.sh/v1alpha1'", d.apiVersion);
    if (d.kind !== 'ScaledObject') fail('kind', "'ScaledObject'", d.kind);
    if (typeof d.metadata?.name !== 'string' || !DNS_SUBDOMAIN.test(d.metadata.name))
      fail('metadata.name', 'a DNS subdomain name', d.metadata?.name);
    const spec = d.spec as unknown as Record<string, unknown> | undefined;
    if (typeof spec !== 'object' || spec === null) fail('spec', 'an object', spec);
    const ref = spec.scaleTargetRef as Record<string, unknown> | undefined;
    if (typeof ref?.name !== 'string' || ref.name === '')
      fail('spec.scaleTargetRef.name', 'a name', ref?.name);
    for (const key of ['apiVersion', 'kind', 'envSourceContainerName'] as const) {
      if (ref?.[key] !== undefined && typeof ref[key] !== 'string')
        fail(`spec.scaleTargetRef.${key}`, 'a string', ref[key]);
    }
    for (const key of ['pollingInterval', 'cooldownPeriod', 'minReplicaCount', 'maxReplicaCount']) {
      const v = spec[key];
      if (v !== undefined && !(Number.isInteger(v) && (v as number) >= 0))
        fail(`spec.${key}`, 'an integer >= 0', v);
    }
    const min = (spec.minReplicaCount as number | undefined) ?? 0;
    const max = (spec.maxReplicaCount as number | undefined) ?? 100;
    if (min > max) fail('spec.minReplicaCount', `at most spec.maxReplicaCount (${max})`, min);
    const triggers = spec.triggers;
    if (!Array.isArray(triggers) || triggers.length === 0)
      fail('spec.triggers', 'a non-empty array', triggers);
    for (const [i, t] of (triggers as Record<string, unknown>[]).entries()) {
      const at = `spec.triggers[${i}]`;
      if (typeof t.type !== 'string' || t.type === '') fail(`${at}.type`, 'a scaler type', t.type);
      const metadata = t.metadata as Record<string, unknown> | undefined;
      if (typeof metadata !== 'object' || metadata === null || Array.isArray(metadata))
        fail(`${at}.metadata`, 'a map of strings', metadata);
      for (const [key, value] of Object.entries(metadata)) {
        if (typeof value !== 'string') fail(`${at}.metadata.${key}`, 'a string', value);
      }
      if (t.metricType !== undefined && !METRIC_TYPES.includes(t.metricType as string))
        fail(`${at}.metricType`, `one of ${METRIC_TYPES.join(', ')}`, t.metricType);
      if (t.type === 'redis') {
        if (typeof metadata.listName !== 'string' || metadata.listName === '')
          fail(`${at}.metadata.listName`, 'the Redis list to watch', metadata.listName);
        if (!/^\d+$/.test(String(metadata.listLength)))
          fail(`${at}.metadata.listLength`, 'an integer as a string', metadata.listLength);
        const address =
          metadata.address !== undefined ||
          metadata.addressFromEnv !== undefined ||
          (metadata.host !== undefined && metadata.port !== undefined);
        if (!address)
          fail(
            `${at}.metadata`,
            'an address (address, addressFromEnv, or host and port)',
            metadata,
          );
        if (metadata.address !== undefined && !/^[^\s:]+:\d+$/.test(metadata.address as string))
          fail(`${at}.metadata.address`, 'host:port', metadata.address);
      }
    }
  }
}
