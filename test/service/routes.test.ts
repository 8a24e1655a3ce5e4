/**
 * The service's routes (service/http/routes.ts), the one table both modes serve: each path's
 * answer and methods, the mode's handlers first, and /healthz from the mode's report.
 */
import type { Server } from 'node:http';
import { Counter } from 'prom-client';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { SharedExposition } from '../../service/http/exposition.ts';
import { createServiceRegistry } from '../../service/http/health-metrics.ts';
import { HostAllowlist } from '../../service/http/hosts.ts';
import { type HealthReport, listeningLine, serviceRoutes } from '../../service/http/routes.ts';
import { createHttpServer, listen, listenOrReport } from '../../service/http/server.ts';

let server: Server | undefined;

afterEach(async () => {
  server?.closeAllConnections();
  await new Promise<void>((r) => (server === undefined ? r() : server.close(() => r())));
  server = undefined;
});

/** A server on a free loopback port answering with the routes; resolves with its URL. */
async function serve(options: Parameters<typeof serviceRoutes>[0]): Promise<string> {
  server = createHttpServer(
    {
      hosts: new HostAllowlist(['localhost']),
      headersTimeoutMs: 5_000,
      requestTimeoutMs: 5_000,
      keepAliveTimeoutMs: 1_000,
    },
    serviceRoutes(options),
  );
  return `http://127.0.0.1:${await listen(server, '127.0.0.1', 0)}`;
}

function metrics(): SharedExposition {
  const registry = createServiceRegistry();
  new Counter({ name: 'routes_test_hits', help: 'a counter', registers: [registry] }).inc(3);
  return new SharedExposition(registry);
}

describe('the service routes', () => {
  it('serves /metrics and /healthz to GET and HEAD only, /ws as 426 to any method, else 404', async () => {
    const url = await serve({
      handlers: [],
      metrics: metrics(),
      health: () => ({ stopping: false, inFlight: 7 }),
    });
    const scrape = await fetch(`${url}/metrics`);
    expect(scrape.status).toBe(200);
    expect(scrape.headers.get('content-type')).toBe('text/plain; version=0.0.4; charset=utf-8');
    expect(await scrape.text()).toContain('routes_test_hits_total 3');
    const open = await fetch(`${url}/metrics`, {
      headers: { accept: 'application/openmetrics-text; version=1.0.0' },
    });
    expect(open.headers.get('content-type')).toMatch(/^application\/openmetrics-text/);
    expect(await open.text()).toMatch(/# EOF\n$/);

    const health = await fetch(`${url}/healthz`);
    expect(health.status).toBe(200);
    expect(health.headers.get('content-type')).toBe('application/json');
    expect(await health.text()).toBe('{"status":"ok","inFlight":7}');
    const head = await fetch(`${url}/healthz`, { method: 'HEAD' });
    expect([head.status, await head.text()]).toEqual([200, '']);

    for (const path of ['/metrics', '/healthz']) {
      const post = await fetch(`${url}${path}`, { method: 'POST' });
      expect([post.status, post.headers.get('allow'), await post.text()]).toEqual([
        405,
        'GET, HEAD',
        'read only\n',
      ]);
    }
    for (const method of ['GET', 'POST']) {
      const ws = await fetch(`${url}/ws`, { method });
      expect([ws.status, ws.headers.get('upgrade'), await ws.text()]).toEqual([
        426,
        'websocket',
        '/ws speaks WebSocket only (Upgrade: websocket)\n',
      ]);
    }
    // The query is not the path: still /healthz.
    expect((await fetch(`${url}/healthz?x=1`)).status).toBe(200);
    for (const path of ['/', '/nope', '/metrics/']) {
      const res = await fetch(`${url}${path}`);
      expect([res.status, await res.text()]).toEqual([
        404,
        'not found: try /, /metrics, /healthz or /ws\n',
      ]);
    }
  });

  it("asks the mode's handlers first, in order, and its report at each /healthz", async () => {
    const asked: string[] = [];
    let report: HealthReport = { stopping: false, inFlight: 0 };
    const url = await serve({
      handlers: [
        (target, _req, res) => {
          asked.push(`first ${target.pathname}`);
          if (target.pathname !== '/metrics') return false;
          res.writeHead(299).end('taken by the first');
          return true;
        },
        (target, _req, res) => {
          asked.push(`second ${target.pathname}`);
          if (target.pathname !== '/') return false;
          res.writeHead(200, { 'content-type': 'text/html' }).end('<p>page</p>');
          return true;
        },
      ],
      metrics: metrics(),
      health: () => report,
    });
    expect(await (await fetch(`${url}/`)).text()).toBe('<p>page</p>');
    const taken = await fetch(`${url}/metrics`);
    expect([taken.status, await taken.text()]).toEqual([299, 'taken by the first']);
    expect((await fetch(`${url}/healthz`)).status).toBe(200);
    expect(asked).toEqual([
      'first /',
      'second /',
      'first /metrics',
      'first /healthz',
      'second /healthz',
    ]);

    report = { stopping: true, inFlight: 2, more: { fleet: { workers: 3, oldest: null } } };
    const stopping = await fetch(`${url}/healthz`);
    expect(stopping.status).toBe(503);
    expect(await stopping.text()).toBe(
      '{"status":"stopping","inFlight":2,"fleet":{"workers":3,"oldest":null}}',
    );
  });

  it('says where it listens, an IPv6 host in brackets', () => {
    expect(listeningLine('127.0.0.1', 9464)).toBe(
      'conversation-orchestrator demo listening on http://127.0.0.1:9464 (the live page at /, /metrics, /healthz, ws://127.0.0.1:9464/ws)',
    );
    expect(listeningLine('::1', 80)).toContain('http://[::1]:80 ');
    expect(listeningLine('::1', 80)).toContain('ws://[::1]:80/ws)');
  });

  it('listens for both modes, or says why not on stderr and gives no port (the service exits 2)', async () => {
    const url = await serve({
      handlers: [],
      metrics: metrics(),
      health: () => ({ stopping: false, inFlight: 0 }),
    });
    const taken = Number(new URL(url).port);
    const second = createHttpServer(
      {
        hosts: new HostAllowlist([]),
        headersTimeoutMs: 5_000,
        requestTimeoutMs: 5_000,
        keepAliveTimeoutMs: 1_000,
      },
      () => {},
    );
    const said: string[] = [];
    const write = vi.spyOn(process.stderr, 'write').mockImplementation((line) => {
      said.push(String(line));
      return true;
    });
    try {
      expect(await listenOrReport(second, '127.0.0.1', taken)).toBeUndefined();
    } finally {
      write.mockRestore();
    }
    expect(said).toEqual([
      `Cannot listen on --host 127.0.0.1 --port ${taken}: the port is in use (EADDRINUSE)\n`,
    ]);
    const port = await listenOrReport(second, '127.0.0.1', 0);
    expect(port).toBeGreaterThan(0);
    await new Promise<void>((r) => second.close(() => r()));
  });
});
