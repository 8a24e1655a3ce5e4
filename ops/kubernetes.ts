/**
 * kubernetes/: the demo service for a cluster running the Prometheus Operator (for example the
 * kube-prometheus-stack), as typed models: the Deployment, its Service and PodDisruptionBudget, a
 * ServiceMonitor, a PrometheusRule holding the very rule groups of prometheus/rules/, and the
 * dashboards as a ConfigMap for Grafana's dashboard sidecar, tied together by a kustomization.
 */

import type { Dashboard } from '@grafana/grafana-foundation-sdk/dashboard';
import { PrometheusRule } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/PrometheusRule';
import { ServiceMonitor } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/ServiceMonitor';
import { Deployment } from 'kubernetes-models/apps/v1/Deployment';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';
import { ConfigMap } from 'kubernetes-models/v1/ConfigMap';
import { Namespace } from 'kubernetes-models/v1/Namespace';
import { Service } from 'kubernetes-models/v1/Service';
import type { OpsConfig } from './config.ts';
import type { Rules } from './rules.ts';
import {
  CONTAINER_NAME,
  PORT_NAME,
  parseSelector,
  SERVICE_NAME,
  scrapeLabels,
} from './selector.ts';

export { SERVICE_NAME };

const PORT = 9464;

/** What every kubernetes-models model offers. */
export interface Manifest {
  toJSON(): unknown;
  validate(): void;
}

/** Every manifest, by file name under kubernetes/. */
export function kubernetesManifests(
  config: OpsConfig,
  rules: Rules,
  dashboards: Readonly<Record<string, Dashboard>>,
): Map<string, Manifest> {
  const k = config.kubernetes;
  const namespace = k.namespace;
  const { relabelings } = scrapeLabels(parseSelector(config.selector), namespace);
  const selector = { 'app.kubernetes.io/name': SERVICE_NAME };
  const labels = {
    ...selector,
    'app.kubernetes.io/component': 'demo-service',
    'app.kubernetes.io/part-of': 'conversation-orchestrator',
  };
  const healthz = { path: '/healthz', port: PORT_NAME };
  const fieldRef = (name: string, fieldPath: string) => ({
    name,
    valueFrom: { fieldRef: { fieldPath } },
  });

  const deployment = new Deployment({
    metadata: { name: SERVICE_NAME, namespace, labels },
    spec: {
      replicas: k.replicas,
      selector: { matchLabels: selector },
      template: {
        metadata: { labels },
        spec: {
          // The service shuts down within 10 s (it aborts in-flight conversations, flushes spans).
          terminationGracePeriodSeconds: 15,
          // The service never talks to the Kubernetes API: no token in the pod.
          automountServiceAccountToken: false,
          securityContext: {
            runAsNonRoot: true,
            // The image's `node` user.
            runAsUser: 1000,
            runAsGroup: 1000,
            fsGroup: 1000,
            seccompProfile: { type: 'RuntimeDefault' },
          },
          // Replicas on different nodes where the cluster allows it.
          topologySpreadConstraints: [
            {
              maxSkew: 1,
              topologyKey: 'kubernetes.io/hostname',
              whenUnsatisfiable: 'ScheduleAnyway',
              labelSelector: { matchLabels: selector },
            },
          ],
          containers: [
            {
              name: CONTAINER_NAME,
              image: k.image,
              ports: [{ name: PORT_NAME, containerPort: PORT, protocol: 'TCP' }],
              env: [
                { name: 'HOST', value: '0.0.0.0' },
                { name: 'PORT', value: String(PORT) },
                { name: 'NODE_ENV', value: 'production' },
                // Traces over OTLP/HTTP, configured the standard way.
                { name: 'OTEL_EXPORTER_OTLP_ENDPOINT', value: k.otlpEndpoint },
                { name: 'OTEL_SERVICE_NAME', value: 'conversation-orchestrator-demo' },
                fieldRef('POD_NAME', 'metadata.name'),
                fieldRef('POD_NAMESPACE', 'metadata.namespace'),
                fieldRef('NODE_NAME', 'spec.nodeName'),
                {
                  name: 'OTEL_RESOURCE_ATTRIBUTES',
                  value:
                    'k8s.pod.name=$(POD_NAME),k8s.namespace.name=$(POD_NAMESPACE),k8s.node.name=$(NODE_NAME)',
                },
              ],
              // Starting runs TypeScript through tsx: give it time before liveness counts.
              startupProbe: { httpGet: healthz, periodSeconds: 2, failureThreshold: 30 },
              // /healthz answers 503 while shutting down: the pod leaves the Service at once.
              readinessProbe: { httpGet: healthz, periodSeconds: 5, failureThreshold: 2 },
              livenessProbe: {
                httpGet: healthz,
                periodSeconds: 10,
                timeoutSeconds: 2,
                failureThreshold: 3,
              },
              resources: {
                requests: { cpu: '100m', memory: '128Mi' },
                limits: { cpu: '1', memory: '384Mi' },
              },
              securityContext: {
                allowPrivilegeEscalation: false,
                readOnlyRootFilesystem: true,
                capabilities: { drop: ['ALL'] },
              },
              // The only writable path: tsx's transform cache and Node's temp files.
              volumeMounts: [{ name: 'tmp', mountPath: '/tmp' }],
            },
          ],
          volumes: [{ name: 'tmp', emptyDir: { sizeLimit: '64Mi' } }],
        },
      },
    },
  });

  const service = new Service({
    metadata: { name: SERVICE_NAME, namespace, labels },
    spec: {
      selector,
      ports: [{ name: PORT_NAME, port: PORT, targetPort: PORT_NAME, protocol: 'TCP' }],
    },
  });

  const disruptionBudget = new PodDisruptionBudget({
    metadata: { name: SERVICE_NAME, namespace, labels },
    spec: { maxUnavailable: 1, selector: { matchLabels: selector } },
  });

  const serviceMonitor = new ServiceMonitor({
    metadata: { name: SERVICE_NAME, namespace, labels: { ...labels, ...k.prometheusSelector } },
    spec: {
      selector: { matchLabels: selector },
      endpoints: [
        {
          port: PORT_NAME,
          path: '/metrics',
          interval: '15s',
          scrapeTimeout: '10s',
          // The selector's `label="value"` matchers (a `job` other than the Service's name, an
          // `env`, …) as target labels, so the rules and dashboards select these targets
          // (defineOpsConfig refuses a selector the targets could not satisfy).
          ...(relabelings.length > 0 ? { relabelings: [...relabelings] } : {}),
        },
      ],
    },
  });

  const prometheusRule = new PrometheusRule({
    metadata: { name: SERVICE_NAME, namespace, labels: { ...labels, ...k.prometheusSelector } },
    // The same groups as prometheus/rules/orchestrator.rules.yml (a test compares them).
    spec: {
      groups: rules.groups.map((g) => ({ name: g.name, rules: [...g.rules] })),
    },
  });

  const dashboardsConfigMap = new ConfigMap({
    metadata: {
      name: `${SERVICE_NAME}-dashboards`,
      namespace,
      // The kube-prometheus-stack's Grafana sidecar loads ConfigMaps with this label (any value).
      labels: { ...labels, grafana_dashboard: '1' },
      // ... into this folder, where its `folderAnnotation` is set to `grafana_folder`.
      annotations: { grafana_folder: 'Conversation orchestrator' },
    },
    data: Object.fromEntries(
      Object.entries(dashboards).map(([file, d]) => [file, `${JSON.stringify(d, null, 2)}\n`]),
    ),
  });

  return new Map<string, Manifest>([
    ['namespace.yaml', new Namespace({ metadata: { name: namespace, labels } })],
    ['deployment.yaml', deployment],
    ['service.yaml', service],
    ['poddisruptionbudget.yaml', disruptionBudget],
    ['servicemonitor.yaml', serviceMonitor],
    ['prometheusrule.yaml', prometheusRule],
    ['dashboards-configmap.yaml', dashboardsConfigMap],
  ]);
}

/** kustomization.yaml: every manifest, in the order they apply. */
export function kustomization(files: readonly string[]): unknown {
  return {
    apiVersion: 'kustomize.config.k8s.io/v1beta1',
    kind: 'Kustomization',
    resources: [...files],
  };
}
