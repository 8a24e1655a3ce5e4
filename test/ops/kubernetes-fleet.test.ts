/**
 * kubernetes/fleet/ as committed: the demo's fleet mode on top of kubernetes/, read back from its
 * YAML and validated against the Kubernetes schemas (kubernetes-models) and KEDA's CRD rules
 * (ops/keda.ts), then for what ties the objects together.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { DEFAULT_OPS_CONFIG, defineOpsConfig } from '../../ops/config.ts';
import { renderOps } from '../../ops/render.ts';
import { DEMO_QUEUE, WORKER_DRAIN_MS } from '../../service/fleet/worker-names.ts';
import {
  envOf,
  expectEveryManifestValid,
  validateManifest,
} from '../helpers/kubernetes-manifests.ts';

const DIR = 'kubernetes/fleet';
// biome-ignore lint/suspicious/noExplicitAny: manifests are walked freely after validation.
type Manifest = { apiVersion: string; kind: string; metadata: any; spec: any };

const kustomization = parse(readFileSync(`${DIR}/kustomization.yaml`, 'utf8'));
const files = (kustomization.resources as string[]).filter((r) => r !== '..');
const manifests = files.map((f) => parse(readFileSync(`${DIR}/${f}`, 'utf8')) as Manifest);
const of = (kind: string) => manifests.filter((m) => m.kind === kind);

describe('kubernetes/fleet/', () => {
  it('is a kustomization of the base and every manifest of the folder, as npm run ops writes it', () => {
    expect(kustomization.resources[0]).toBe('..');
    expect([...files].sort()).toEqual(
      readdirSync(DIR)
        .filter((f) => f !== 'kustomization.yaml')
        .sort(),
    );
    const rendered = renderOps(DEFAULT_OPS_CONFIG);
    for (const f of [...files, 'kustomization.yaml']) {
      expect(readFileSync(`${DIR}/${f}`, 'utf8'), f).toBe(rendered.get(`${DIR}/${f}`));
    }
  });

  it('validates every manifest against the Kubernetes schemas and KEDA ScaledObject rules', () => {
    expectEveryManifestValid(manifests, [
      'Deployment',
      'PodDisruptionBudget',
      'PodMonitor',
      'ScaledObject',
      'Service',
      'StatefulSet',
    ]);
  });

  it('would reject a ScaledObject KEDA does not allow', () => {
    const scaler = structuredClone(of('ScaledObject')[0] as Manifest);
    scaler.spec.triggers[0].metadata.listLength = 100;
    expect(() => validateManifest(scaler)).toThrow(
      'Expected spec.triggers[0].metadata.listLength to be a string, got 100',
    );
    const noTarget = structuredClone(of('ScaledObject')[0] as Manifest);
    delete noTarget.spec.scaleTargetRef.name;
    expect(() => validateManifest(noTarget)).toThrow(
      'Expected spec.scaleTargetRef.name to be a name',
    );
    const inverted = structuredClone(of('ScaledObject')[0] as Manifest);
    inverted.spec.minReplicaCount = 20;
    expect(() => validateManifest(inverted)).toThrow(
      'Expected spec.minReplicaCount to be at most spec.maxReplicaCount (10), got 20',
    );
  });

  it("scales the worker Deployment on BullMQ's wait list of the demo queue, in the config's bounds", () => {
    const scaler = of('ScaledObject')[0] as Manifest;
    const worker = of('Deployment')[0] as Manifest;
    const redis = of('Service')[0] as Manifest;
    const k = DEFAULT_OPS_CONFIG.kubernetes;
    expect(scaler.spec.scaleTargetRef).toEqual({ name: worker.metadata.name });
    expect(scaler.spec.minReplicaCount).toBe(k.minWorkers);
    expect(scaler.spec.maxReplicaCount).toBe(k.maxWorkers);
    expect(scaler.spec.triggers).toEqual([
      {
        type: 'redis',
        metadata: {
          address: `${redis.metadata.name}.${k.namespace}:6379`,
          listName: `bull:${DEMO_QUEUE}:wait`,
          listLength: String(k.waitingJobsPerWorker),
        },
      },
    ]);
  });

  it("scrapes each worker's /metrics port as the rules' job", () => {
    const worker = of('Deployment')[0] as Manifest;
    const container = worker.spec.template.spec.containers[0];
    const env = envOf(container);
    expect(env).toMatchObject({ HOST: '0.0.0.0', WORKER_METRICS_PORT: '9464' });
    expect(container.ports).toEqual([{ name: 'http', containerPort: 9464 }]);
    const monitor = of('PodMonitor')[0] as Manifest;
    expect(monitor.spec.selector.matchLabels).toEqual(worker.spec.selector.matchLabels);
    expect(monitor.spec.podMetricsEndpoints).toMatchObject([{ port: 'http', path: '/metrics' }]);
    // The series get the job the rules and dashboards select (the default selector's).
    expect(monitor.spec.podMetricsEndpoints[0].relabelings).toContainEqual({
      action: 'replace',
      targetLabel: 'job',
      replacement: 'conversation-orchestrator',
    });
    expect(DEFAULT_OPS_CONFIG.selector).toContain('job="conversation-orchestrator"');
  });

  it('gives workers a grace period longer than their drain bound, and a disruption budget', () => {
    const worker = of('Deployment')[0] as Manifest;
    const pod = worker.spec.template.spec;
    // close() returns within the drain bound plus about 1 s (docs/fleet.md).
    expect(pod.terminationGracePeriodSeconds).toBeGreaterThan(WORKER_DRAIN_MS / 1000 + 1);
    expect(pod.containers[0].command).toEqual(['node', '--import', 'tsx', 'service/worker.ts']);
    const env = envOf(pod.containers[0]);
    expect(env.REDIS_URL).toBe('redis://conversation-orchestrator-redis:6379');
    expect(env.CONCURRENCY).toBe(String(DEFAULT_OPS_CONFIG.kubernetes.workerConcurrency));
    const budget = of('PodDisruptionBudget')[0] as Manifest;
    expect(budget.spec).toEqual({ maxUnavailable: 1, selector: worker.spec.selector });
    expect(worker.spec.template.metadata.labels).toMatchObject(worker.spec.selector.matchLabels);
  });

  it('runs Redis with AOF on a volume, a pinned image, and the demo Deployment as its producer', () => {
    const redis = of('StatefulSet')[0] as Manifest;
    const container = redis.spec.template.spec.containers[0];
    expect(container.image).toBe(DEFAULT_OPS_CONFIG.kubernetes.redisImage);
    expect(container.image).toMatch(/^redis:\d+\.\d+\.\d+/);
    expect(container.args.slice(0, 2)).toEqual(['--appendonly', 'yes']);
    expect(container.volumeMounts).toEqual([{ name: 'data', mountPath: '/data' }]);
    expect(redis.spec.volumeClaimTemplates[0].metadata.name).toBe('data');
    expect(of('Service')[0]?.spec.selector).toEqual(redis.spec.selector.matchLabels);
    expect(kustomization.patches[0].target).toEqual({
      kind: 'Deployment',
      name: 'conversation-orchestrator',
    });
    expect(parse(kustomization.patches[0].patch)[0].value).toEqual({
      name: 'REDIS_URL',
      value: 'redis://conversation-orchestrator-redis:6379',
    });
  });

  it('refuses a config whose worker bounds or Redis image make no sense', () => {
    expect(() => defineOpsConfig({ kubernetes: { maxWorkers: 0 } as never })).toThrow(
      /kubernetes\.maxWorkers/,
    );
    expect(() =>
      defineOpsConfig({ kubernetes: { minWorkers: 5, maxWorkers: 3 } as never }),
    ).toThrow(/kubernetes\.maxWorkers/);
    expect(() => defineOpsConfig({ kubernetes: { redisImage: 'redis:latest' } as never })).toThrow(
      /kubernetes\.redisImage/,
    );
  });
});
