/**
 * The demo's fleet mode with real processes: a redis-server with AOF, the service as producer
 * and page, its two worker processes, one of them SIGKILLed mid-work.
 */
import { spawn, spawnSync } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../helpers/fleet-workers.ts';
import { hasRedisServer, type RunningRedis, startRedis } from '../helpers/redis.ts';
import { liveClient, spawnService } from '../helpers/service.ts';

interface Health {
  readonly inFlight: number;
  readonly fleet: {
    readonly started: number;
    readonly ended: number;
    readonly suspended: number;
    readonly workers: number;
    readonly oldestInFlightStartedAt: number | null;
  };
}

describe.skipIf(!hasRedisServer())('the demo service in fleet mode', () => {
  let redis: RunningRedis;
  beforeAll(async () => {
    redis = await startRedis({ aof: true });
  });
  afterAll(async () => {
    await redis?.stop();
  });

  it('ends every conversation started before one of its two workers is SIGKILLed, resuming the killed one elsewhere', async () => {
    const service = spawnService([
      '--redis',
      redis.url,
      '--workers',
      '2',
      '--rate',
      '20',
      '--concurrency',
      '24',
      '--latency-ms',
      '15',
      '--mix',
      'converge=2,slow=1,never=1,fail=1',
      '--progress-s',
      '600',
    ]);
    const pids = () =>
      new Map(
        [...service.stdout().matchAll(/worker (worker-\d) started \(pid (\d+)\)/g)].map((m) => [
          m[1],
          Number(m[2]),
        ]),
      );
    let client: ReturnType<typeof liveClient> | undefined;
    try {
      await waitFor(
        () => /worker-1 ready/.test(service.stdout()) && /worker-2 ready/.test(service.stdout()),
        90_000,
        () => `two ready workers: ${service.stdout()} ${service.stderr()}`,
        () => service.child.exitCode !== null,
      );
      const url = /listening on (http:\/\/[^ ]+)/.exec(service.stdout())?.[1] as string;
      const health = async () => (await (await fetch(`${url}/healthz`)).json()) as Health;
      client = liveClient(`${url.replace('http', 'ws')}/ws`);
      await waitFor(
        async () => (await health()).fleet.ended >= 20,
        60_000,
        async () => `20 endings: ${JSON.stringify(await health())}`,
      );

      const victim = pids().get('worker-1') as number;
      const heardBeforeKill = client.messages.length;
      process.kill(victim, 'SIGKILL');
      const killedAt = Date.now();
      const before = await health();
      await waitFor(
        () => /worker worker-1 exited \(SIGKILL\)/.test(service.stdout()),
        10_000,
        () => `the producer to see worker-1 die: ${service.stdout()}`,
      );
      // What the page hears from here on comes from live workers: the dead one's last frames
      // have arrived (pub/sub takes milliseconds).
      await new Promise((r) => setTimeout(r, 1_500));
      const heardAfterKill = client.messages.length;
      // Every conversation started before the crash has ended (none is in flight from before).
      await waitFor(
        async () => {
          const h = await health();
          return (
            h.fleet.oldestInFlightStartedAt === null || h.fleet.oldestInFlightStartedAt > killedAt
          );
        },
        60_000,
        async () =>
          `every conversation started before the kill to end: ${JSON.stringify(await health())}`,
      );
      const after = await health();
      expect(after.fleet.ended).toBeGreaterThanOrEqual(before.fleet.started);

      // The page saw conversations run on worker-1 and, after the crash, go on on a live worker:
      // worker-2, or worker-1 restarted by the producer (same name, a new process), whichever
      // took the recovered job first.
      const onVictim = new Set<string>();
      const endedBefore = new Set<string>();
      client.messages.slice(0, heardBeforeKill).forEach((m) => {
        if (m.type === 'dispatch' && m.worker === 'worker-1')
          onVictim.add(m.conversationId as string);
        if (m.type === 'end') endedBefore.add(m.conversationId as string);
      });
      const goneOn = new Set<string>();
      for (const m of client.messages.slice(heardAfterKill)) {
        if (m.type === 'dispatch' || m.type === 'end') goneOn.add(m.conversationId as string);
      }
      const moved = [...onVictim].filter((id) => !endedBefore.has(id) && goneOn.has(id));
      expect(moved.length).toBeGreaterThan(0);

      // The producer restarts the dead worker.
      await waitFor(
        () =>
          pids().get('worker-1') !== victim &&
          /worker-1 ready[^\n]*\n[\s\S]*worker-1 ready/.test(service.stdout()),
        90_000,
        () => `worker-1 to come back: ${service.stdout()}`,
      );
      service.child.kill('SIGTERM');
      expect(await service.exited).toBe(0);
      expect(service.stdout()).toMatch(
        /SIGTERM: stopped 2 workers, left \d+ conversations in flight in Redis/,
      );
    } finally {
      client?.ws.terminate();
      if (service.child.exitCode === null) {
        service.child.kill('SIGTERM');
        await service.exited;
      }
      for (const pid of pids().values()) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {}
      }
    }
  }, 300_000);

  it('keeps starting conversations while suspended ones wait for approval: a waiting conversation holds no slot', async () => {
    const concurrency = 3;
    const service = spawnService([
      '--redis',
      redis.url,
      '--workers',
      '1',
      '--rate',
      '20',
      '--concurrency',
      String(concurrency),
      '--mix',
      'converge=1,approval=1',
      '--progress-s',
      '600',
    ]);
    try {
      await waitFor(
        () => /worker-1 ready/.test(service.stdout()),
        90_000,
        () => `a ready worker: ${service.stdout()} ${service.stderr()}`,
        () => service.child.exitCode !== null,
      );
      const url = /listening on (http:\/\/[^ ]+)/.exec(service.stdout())?.[1] as string;
      const health = async () => (await (await fetch(`${url}/healthz`)).json()) as Health;
      // Three times as many started and not ended as may run at once: the waiting hold no slot.
      await waitFor(
        async () => {
          const h = await health();
          return h.fleet.started - h.fleet.ended > 3 * concurrency;
        },
        60_000,
        async () => `${3 * concurrency} conversations waiting: ${JSON.stringify(await health())}`,
      );
      const h = await health();
      expect(h.inFlight).toBeLessThanOrEqual(concurrency);
      // Every conversation started is in flight, ended or waiting for a person.
      expect(h.fleet.suspended).toBe(h.fleet.started - h.fleet.ended - h.inFlight);
      expect(h.fleet.suspended).toBeGreaterThan(2 * concurrency);
      // Its /metrics is the single-process service's: clean by promtool's lint.
      const metrics = await (await fetch(`${url}/metrics`)).text();
      expect(metrics).toMatch(/^nodejs_active_handles\{type="Server"\} 1$/m);
      expect(metrics).not.toMatch(/^nodejs_active_(handles|requests|resources)_total/m);
      const lint = spawnSync('promtool', ['check', 'metrics'], {
        input: metrics,
        encoding: 'utf8',
      });
      expect(lint.stdout + lint.stderr).toBe('');
      service.child.kill('SIGTERM');
      expect(await service.exited).toBe(0);
    } finally {
      if (service.child.exitCode === null) {
        service.child.kill('SIGKILL');
        await service.exited;
      }
    }
  }, 180_000);

  it('a worker serves its /metrics (WORKER_METRICS_PORT), drains on SIGHUP (a closed terminal) and exits 0, as on SIGTERM', async () => {
    // Its own redis-server: the queue of the tests above may still hold jobs this worker would
    // take (and hand back), which is not what this test counts.
    const own = await startRedis();
    const worker = spawn(
      process.execPath,
      ['--import', 'tsx', 'service/worker.ts', '--redis', own.url],
      {
        env: { ...process.env, WORKER_ID: 'worker-hup', WORKER_METRICS_PORT: '0' },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let out = '';
    worker.stdout.on('data', (c: Buffer) => {
      out += c.toString();
    });
    worker.stderr.on('data', (c: Buffer) => {
      out += c.toString();
    });
    const exited = new Promise<[number | null, NodeJS.Signals | null]>((resolve) =>
      worker.once('exit', (code, signal) => resolve([code, signal])),
    );
    try {
      await waitFor(
        () => /worker-hup ready/.test(out),
        90_000,
        () => `the worker to be ready: ${out}`,
        () => worker.exitCode !== null || worker.signalCode !== null,
      );
      // Its /metrics: the queue's metrics (BullMQ's job counts read from Redis) beside the
      // conversations' and the process's, clean by promtool but for BullMQ's own gauge name.
      const port = /worker-hup metrics on http:\/\/127\.0\.0\.1:(\d+)\/metrics/.exec(out)?.[1];
      expect(port, out).toBeDefined();
      const metrics = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
      expect(metrics).toMatch(/^orchestrator_queue_jobs_stalled_total\{queue="[^"]+"\} 0$/m);
      expect(metrics).toMatch(/^bullmq_job_count\{queue="[^"]+",state="waiting"\} 0$/m);
      expect(metrics).toMatch(/^# TYPE orchestrator_conversations_ended_total counter$/m);
      expect(metrics).toMatch(/^nodejs_heap_size_used_bytes /m);
      const lint = spawnSync('promtool', ['check', 'metrics'], {
        input: metrics,
        encoding: 'utf8',
      });
      expect(lint.stdout + lint.stderr).toBe(
        'bullmq_job_count non-histogram and non-summary metrics should not have "_count" suffix\n',
      );
      expect((await fetch(`http://127.0.0.1:${port}/healthz`)).status).toBe(200);
      worker.kill('SIGHUP');
      expect(await exited).toEqual([0, null]);
      expect(out).toMatch(
        /^worker-hup SIGHUP: drained \(0 segments ended, 0 suspended, 0 handed back\)$/m,
      );
    } finally {
      if (worker.exitCode === null && worker.signalCode === null) worker.kill('SIGKILL');
      await own.stop();
    }
  }, 120_000);

  it('a worker refuses a WORKER_METRICS_PORT that is not a port: exit 2 and what was expected, before it connects to anything', () => {
    for (const bad of ['99999', 'abc', '-1', '80.5', ' 9464']) {
      const r = spawnSync(
        process.execPath,
        // Port 9 (discard): nothing is asked of it, the value is refused first.
        ['--import', 'tsx', 'service/worker.ts', '--redis', 'redis://127.0.0.1:9'],
        {
          env: { ...process.env, WORKER_ID: 'worker-bad', WORKER_METRICS_PORT: bad },
          encoding: 'utf8',
          timeout: 60_000,
        },
      );
      expect(r.status, r.stderr).toBe(2);
      expect(r.stderr).toBe(
        `Expected WORKER_METRICS_PORT to be a port number from 0 to 65535, got \`${bad}\`\n`,
      );
    }
  }, 120_000);

  it('npm run chaos with a short duration loses no conversation and ends each as a single process does', () => {
    const r = spawnSync('npm', ['run', 'chaos', '--', '--duration', '15'], {
      encoding: 'utf8',
      timeout: 200_000,
    });
    const row = (name: string) =>
      new RegExp(`^\\| ${name} +\\| +([^|]+?) \\|$`, 'm').exec(r.stdout)?.[1];
    expect(r.status, r.stdout + r.stderr).toBe(0);
    const started = Number(row('conversations started'));
    // 15 s x 60 % enqueueing x 8 per second.
    expect(started).toBe(72);
    expect(row('ended')).toBe('72');
    expect(row('lost')).toBe('0');
    expect(row('endings equal to a single-process run')).toBe('72 of 72');
    // Workers were killed while conversations ran.
    expect(r.stdout).toMatch(/, [1-9]\d* SIGKILLs,/);
  }, 240_000);
});
