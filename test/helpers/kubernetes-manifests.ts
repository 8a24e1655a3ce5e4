/**
 * What the tests of the committed Kubernetes manifests (kubernetes/ and kubernetes/fleet/) share:
 * the model of each kind the bundle uses and a manifest validated by it, the check that a folder
 * holds the kinds it should and that each passes, and a container's environment as a record.
 */
import { PodMonitor } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/PodMonitor';
import { PrometheusRule } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/PrometheusRule';
import { ServiceMonitor } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/ServiceMonitor';
import { Deployment } from 'kubernetes-models/apps/v1/Deployment';
import { StatefulSet } from 'kubernetes-models/apps/v1/StatefulSet';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';
import { ConfigMap } from 'kubernetes-models/v1/ConfigMap';
import { Namespace } from 'kubernetes-models/v1/Namespace';
import { Service } from 'kubernetes-models/v1/Service';
import { expect } from 'vitest';
import { ScaledObject } from '../../ops/keda.ts';

/**
 * The model class of each `apiVersion/kind` in kubernetes/ and kubernetes/fleet/ (KEDA's
 * ScaledObject by ops/keda.ts): its constructor validates nothing, `validate()` does.
 */
const MODELS: Record<string, new (data: never) => { validate(): void }> = {
  'v1/Namespace': Namespace,
  'v1/Service': Service,
  'v1/ConfigMap': ConfigMap,
  'apps/v1/Deployment': Deployment,
  'apps/v1/StatefulSet': StatefulSet,
  'policy/v1/PodDisruptionBudget': PodDisruptionBudget,
  'monitoring.coreos.com/v1/ServiceMonitor': ServiceMonitor,
  'monitoring.coreos.com/v1/PrometheusRule': PrometheusRule,
  'monitoring.coreos.com/v1/PodMonitor': PodMonitor,
  'keda.sh/v1alpha1/ScaledObject': ScaledObject,
};

interface Kinded {
  readonly apiVersion: string;
  readonly kind: string;
}

/** Validates a manifest with the model of its kind, throwing what its schema refuses; one of no known kind throws. */
export function validateManifest(manifest: Kinded): void {
  const Model = MODELS[`${manifest.apiVersion}/${manifest.kind}`];
  if (!Model) throw new Error(`no model for ${manifest.apiVersion} ${manifest.kind}`);
  new Model(manifest as never).validate();
}

/** Expects `manifests` to be of exactly the `kinds` (in alphabetical order), each valid. */
export function expectEveryManifestValid(
  manifests: readonly Kinded[],
  kinds: readonly string[],
): void {
  expect(manifests.map((m) => m.kind).sort()).toEqual(kinds);
  for (const manifest of manifests) {
    expect(() => validateManifest(manifest), manifest.kind).not.toThrow();
  }
}

/** A container's `env` as a record of each name's value. */
export function envOf(container: {
  readonly env: readonly { name: string; value?: string }[];
}): Record<string, string | undefined> {
  return Object.fromEntries(container.env.map((e) => [e.name, e.value]));
}
