import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { freePort } from './prometheus.ts';

/** One alert of an Alertmanager webhook notification. */
export interface WebhookAlert {
  status: 'firing' | 'resolved';
  labels: Record<string, string>;
  annotations: Record<string, string>;
}

/** What a webhook receiver got: the path (the receiver's name) and the alerts. */
export interface Notification {
  path: string;
  receiver: string;
  status: string;
  alerts: WebhookAlert[];
}

export interface WebhookReceiver {
  readonly url: string;
  readonly notifications: Notification[];
  close(): Promise<void>;
}

function body(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    let text = '';
    req.setEncoding('utf8');
    req.on('data', (c: string) => {
      text += c;
    });
    req.on('end', () => resolve(text));
    req.on('error', reject);
  });
}

/** A local HTTP receiver for Alertmanager's webhooks, keeping every notification. */
export async function startWebhookReceiver(): Promise<WebhookReceiver> {
  const notifications: Notification[] = [];
  const server = createServer(async (req, res) => {
    try {
      const payload = JSON.parse(await body(req)) as Omit<Notification, 'path'>;
      notifications.push({ ...payload, path: req.url ?? '' });
      res.end();
    } catch (error) {
      // Not a notification: say so to the sender (and in the test's failure), never crash.
      res.statusCode = 400;
      res.end(String(error));
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}`,
    notifications,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** An alert as Alertmanager's API v2 lists it. */
export interface ApiAlert {
  fingerprint: string;
  labels: Record<string, string>;
  status: { state: 'active' | 'suppressed' | 'unprocessed'; inhibitedBy: string[] };
}

export interface RunningAlertmanager {
  /** `host:port`, for Prometheus' alerting config. */
  readonly address: string;
  alerts(): Promise<ApiAlert[]>;
  stop(): Promise<void>;
  log(): string;
}

/** A real Alertmanager (Debian's prometheus-alertmanager) on loopback, no clustering, its own data dir. */
export async function startAlertmanager(config: unknown): Promise<RunningAlertmanager> {
  const dir = mkdtempSync(join(tmpdir(), 'orchestrator-alertmanager-'));
  const port = await freePort();
  writeFileSync(join(dir, 'alertmanager.yml'), stringify(config));
  let log = '';
  const child: ChildProcess = spawn(
    'prometheus-alertmanager',
    [
      `--config.file=${join(dir, 'alertmanager.yml')}`,
      `--storage.path=${join(dir, 'data')}`,
      `--web.listen-address=127.0.0.1:${port}`,
      '--cluster.listen-address=',
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  child.stdout?.on('data', (c: Buffer) => {
    log += c.toString();
  });
  child.stderr?.on('data', (c: Buffer) => {
    log += c.toString();
  });
  const url = `http://127.0.0.1:${port}`;
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await exited;
    }
    rmSync(dir, { recursive: true, force: true });
  };
  const deadline = Date.now() + 30_000;
  for (;;) {
    try {
      if ((await fetch(`${url}/-/ready`)).ok) break;
    } catch {
      // not up yet
    }
    if (Date.now() > deadline || child.exitCode !== null) {
      await stop();
      throw new Error(`Alertmanager did not start:\n${log}`);
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  return {
    address: `127.0.0.1:${port}`,
    log: () => log,
    async alerts() {
      return (await (await fetch(`${url}/api/v2/alerts`)).json()) as ApiAlert[];
    },
    stop,
  };
}
