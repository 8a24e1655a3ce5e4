/**
 * kubernetes/ as committed, read back from its YAML and checked against the Kubernetes and
 * Prometheus Operator schemas by kubernetes-models, then for what ties the objects together.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parse, parseAllDocuments } from 'yaml';
import { DEFAULT_OPS_CONFIG } from '../../ops/config.ts';
import {
  envOf,
  expectEveryManifestValid,
  validateManifest,
} from '../helpers/kubernetes-manifests.ts';

const DIR = 'kubernetes';

interface Manifest {
  apiVersion: string;
  kind: string;
  metadata: {
    name: string;
    namespace?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
  };
  // biome-ignore lint/suspicious/noExplicitAny: manifests are walked freely after validation.
  spec?: any;
  data?: Record<string, string>;
}

const kustomization = parse(readFileSync(`${DIR}/kustomization.yaml`, 'utf8')) as {
  apiVersion: string;
  kind: string;
  resources: string[];
};

function documents(file: string): Manifest[] {
  return parseAllDocuments(readFileSync(`${DIR}/${file}`, 'utf8')).map((d) => d.toJS() as Manifest);
}

const manifests = kustomization.resources.flatMap((file) => documents(file));

function one(kind: string): Manifest {
  const found = manifests.filter((m) => m.kind === kind);
  expect(found, kind).toHaveLength(1);
  return found[0] as Manifest;
}

describe('kubernetes/', () => {
  it('is one kustomization listing every manifest in the folder, each once', () => {
    expect(kustomization.apiVersion).toBe('kustomize.config.k8s.io/v1beta1');
    expect(kustomization.kind).toBe('Kustomization');
    // kubernetes/fleet/ is a kustomization of its own on top of this one (test/ops-kubernetes-fleet).
    const files = readdirSync(DIR).filter((f) => f !== 'kustomization.yaml' && f !== 'fleet');
    expect([...kustomization.resources].sort()).toEqual(files.sort());
    expect(new Set(kustomization.resources).size).toBe(kustomization.resources.length);
  });

  it('validates every manifest against the Kubernetes and Prometheus Operator schemas', () => {
    expectEveryManifestValid(manifests, [
      'ConfigMap',
      'Deployment',
      'Namespace',
      'PodDisruptionBudget',
      'PrometheusRule',
      'Service',
      'ServiceMonitor',
    ]);
  });

  it('would reject a manifest the schemas do not allow', () => {
    const deployment = structuredClone(one('Deployment'));
    deployment.spec.replicas = 'three';
    expect(() => validateManifest(deployment)).toThrow(/replicas must be integer/);
    const rule = structuredClone(one('PrometheusRule'));
    rule.spec.groups[0].rules[0].labels = { quantile: 0.5 };
    expect(() => validateManifest(rule)).toThrow(/must be string/);
  });

  it('puts every namespaced object in the config namespace', () => {
    const { namespace } = DEFAULT_OPS_CONFIG.kubernetes;
    expect(one('Namespace').metadata.name).toBe(namespace);
    for (const m of manifests.filter((m) => m.kind !== 'Namespace')) {
      expect(m.metadata.namespace, m.kind).toBe(namespace);
    }
  });

  it('runs several replicas, non-root on a read-only root filesystem, with probes on /healthz, resources and OTLP from the standard env vars', () => {
    const deployment = one('Deployment');
    expect(deployment.spec.replicas).toBeGreaterThanOrEqual(2);
    const pod = deployment.spec.template.spec;
    expect(pod.securityContext).toMatchObject({ runAsNonRoot: true, runAsUser: 1000 });
    // The service never calls the Kubernetes API: no service account token mounted.
    expect(pod.automountServiceAccountToken).toBe(false);
    expect(pod.containers).toHaveLength(1);
    const [container] = pod.containers;
    expect(container.securityContext).toEqual({
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      capabilities: { drop: ['ALL'] },
    });
    const env = envOf(container);
    expect(env).toMatchObject({
      HOST: '0.0.0.0',
      PORT: '9464',
      OTEL_EXPORTER_OTLP_ENDPOINT: DEFAULT_OPS_CONFIG.kubernetes.otlpEndpoint,
      OTEL_SERVICE_NAME: 'conversation-orchestrator-demo',
    });
    const port = container.ports.find((p: { name: string }) => p.name === 'http');
    expect(port.containerPort).toBe(Number(env.PORT));
    for (const probe of ['startupProbe', 'readinessProbe', 'livenessProbe']) {
      expect(container[probe].httpGet, probe).toEqual({ path: '/healthz', port: 'http' });
    }
    expect(Object.keys(container.resources.requests).sort()).toEqual(['cpu', 'memory']);
    expect(Object.keys(container.resources.limits).sort()).toEqual(['cpu', 'memory']);
    // The one writable path is a volume.
    const tmp = container.volumeMounts.find((v: { mountPath: string }) => v.mountPath === '/tmp');
    expect(pod.volumes.map((v: { name: string }) => v.name)).toContain(tmp.name);
  });

  it('wires the Deployment, Service, disruption budget and ServiceMonitor by the same labels and port', () => {
    const deployment = one('Deployment');
    const service = one('Service');
    const monitor = one('ServiceMonitor');
    const podLabels = deployment.spec.template.metadata.labels;
    expect(podLabels).toMatchObject(deployment.spec.selector.matchLabels);
    expect(podLabels).toMatchObject(service.spec.selector);
    expect(podLabels).toMatchObject(one('PodDisruptionBudget').spec.selector.matchLabels);
    expect(service.metadata.labels).toMatchObject(monitor.spec.selector.matchLabels);
    expect(service.spec.ports.map((p: { name: string }) => p.name)).toEqual([
      monitor.spec.endpoints[0].port,
    ]);
    expect(service.spec.ports[0].targetPort).toBe('http');
    expect(monitor.spec.endpoints[0].path).toBe('/metrics');
    // The Operator names the scrape job after the Service, and the endpoint's relabelings set the
    // selector's `job` explicitly: the rules' default selector picks the targets.
    expect(DEFAULT_OPS_CONFIG.selector).toBe(`job="${service.metadata.name}"`);
    expect(monitor.spec.endpoints[0].relabelings).toEqual([
      { action: 'replace', targetLabel: 'job', replacement: service.metadata.name },
    ]);
  });

  it('labels the ServiceMonitor and PrometheusRule for the kube-prometheus-stack Prometheus', () => {
    for (const kind of ['ServiceMonitor', 'PrometheusRule']) {
      expect(one(kind).metadata.labels, kind).toMatchObject({ release: 'kube-prometheus-stack' });
    }
  });

  it('holds in its PrometheusRule exactly the rule groups of prometheus/rules/', () => {
    const plain = readdirSync('prometheus/rules').flatMap(
      (f) => (parse(readFileSync(`prometheus/rules/${f}`, 'utf8')) as { groups: unknown[] }).groups,
    );
    expect(one('PrometheusRule').spec.groups).toEqual(plain);
  });

  it("ships the dashboards of grafana/dashboards/ in a ConfigMap for Grafana's sidecar", () => {
    const configMap = one('ConfigMap');
    expect(configMap.metadata.labels).toMatchObject({ grafana_dashboard: '1' });
    expect(configMap.metadata.annotations).toEqual({ grafana_folder: 'Conversation orchestrator' });
    const files = readdirSync('grafana/dashboards').sort();
    expect(Object.keys(configMap.data ?? {}).sort()).toEqual(files);
    for (const file of files) {
      expect(configMap.data?.[file], file).toBe(readFileSync(`grafana/dashboards/${file}`, 'utf8'));
    }
  });
});
