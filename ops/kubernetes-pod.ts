/**
 * What the bundle's pods have in common: the demo image's non-root user, containers that cannot
 * escalate or write outside /tmp, and the Node.js processes' resources. The service's Deployment
 * (ops/kubernetes.ts), the fleet's workers and Redis (ops/fleet-kubernetes.ts) take them from
 * here. Each call returns fresh objects: YAML would write an object used twice as an alias.
 */

/** The pod of a Node.js container: the image's `node` user, the runtime's seccomp profile. */
export function nodePodSecurity() {
  return {
    runAsNonRoot: true,
    // The image's `node` user.
    runAsUser: 1000,
    runAsGroup: 1000,
    fsGroup: 1000,
    seccompProfile: { type: 'RuntimeDefault' as const },
  };
}

/** A container that gains no privilege, drops every capability and has a read-only root. */
export function restrictedContainer() {
  return {
    allowPrivilegeEscalation: false,
    readOnlyRootFilesystem: true,
    capabilities: { drop: ['ALL'] },
  };
}

/** A container's CPU and memory: what a Node.js process of the demo asks for, and its limit. */
export function containerResources(memoryLimit: string) {
  return {
    requests: { cpu: '100m', memory: '128Mi' },
    limits: { cpu: '1', memory: memoryLimit },
  };
}

/** The Node.js containers' memory limit. */
export const NODE_MEMORY_LIMIT = '384Mi';

/** The only writable path of a Node.js container: tsx's transform cache and Node's temp files. */
export function tmpMount() {
  return [{ name: 'tmp', mountPath: '/tmp' }];
}

/** The volume behind `tmpMount()`. */
export function tmpVolume() {
  return [{ name: 'tmp', emptyDir: { sizeLimit: '64Mi' } }];
}

/**
 * What a Node.js container of the demo image ends with: its resources, its restrictions and the
 * mount of `/tmp` (the pod holds `tmpVolume()`).
 */
export function nodeContainer() {
  return {
    resources: containerResources(NODE_MEMORY_LIMIT),
    securityContext: restrictedContainer(),
    volumeMounts: tmpMount(),
  };
}
