/**
 * The checks of the Kubernetes options: names and labels Kubernetes accepts, positive counts,
 * and images that say which build they run.
 */
import { expect } from './check.ts';
import type { OpsConfig } from './config-types.ts';

/** A Kubernetes label: an optional DNS prefix, then a name of 1-63 characters; values like names or empty. */
const K8S_LABEL_KEY =
  /^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?\/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/;
const K8S_LABEL_VALUE = /^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$/;
const DNS_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

/** Throws an `OpsConfigError` for the first Kubernetes option that is wrong. */
export function checkKubernetes(config: OpsConfig): void {
  const k = config.kubernetes;
  /** A count the manifests need at least one of. */
  const positive = (
    key: 'replicas' | 'minWorkers' | 'maxWorkers' | 'workerConcurrency' | 'waitingJobsPerWorker',
  ) =>
    expect(
      Number.isInteger(k[key]) && k[key] >= 1,
      `kubernetes.${key}`,
      'a positive integer',
      k[key],
    );
  expect(
    typeof k.namespace === 'string' && DNS_LABEL.test(k.namespace),
    'kubernetes.namespace',
    'a DNS label',
    k.namespace,
  );
  expect(
    typeof k.image === 'string' && /^\S+$/.test(k.image) && k.image !== '',
    'kubernetes.image',
    'an image reference',
    k.image,
  );
  positive('replicas');
  expect(
    typeof k.prometheusSelector === 'object' &&
      k.prometheusSelector !== null &&
      !Array.isArray(k.prometheusSelector) &&
      Object.entries(k.prometheusSelector).every(
        ([key, v]) => K8S_LABEL_KEY.test(key) && typeof v === 'string' && K8S_LABEL_VALUE.test(v),
      ),
    'kubernetes.prometheusSelector',
    'Kubernetes labels such as `{ release: "kube-prometheus-stack" }`',
    k.prometheusSelector,
  );
  expect(
    typeof k.otlpEndpoint === 'string' && /^https?:\/\/\S+$/.test(k.otlpEndpoint),
    'kubernetes.otlpEndpoint',
    'an http(s) URL',
    k.otlpEndpoint,
  );
  for (const key of [
    'minWorkers',
    'maxWorkers',
    'workerConcurrency',
    'waitingJobsPerWorker',
  ] as const) {
    positive(key);
  }
  expect(
    k.maxWorkers >= k.minWorkers,
    'kubernetes.maxWorkers',
    `at least kubernetes.minWorkers (${k.minWorkers})`,
    k.maxWorkers,
  );
  expect(
    typeof k.redisImage === 'string' &&
      /^\S+:\S+$/.test(k.redisImage) &&
      !k.redisImage.endsWith(':latest'),
    'kubernetes.redisImage',
    'an image reference with a pinned tag',
    k.redisImage,
  );
}
