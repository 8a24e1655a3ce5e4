import { writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage } from 'node:http';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { startDaemon } from './daemon.ts';
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
  const port = await freePort();
  const daemon = await startDaemon(
    'Alertmanager',
    'prometheus-alertmanager',
    port,
    (dir) => {
      writeFileSync(join(dir, 'alertmanager.yml'), stringify(config));
      return [
        `--config.file=${join(dir, 'alertmanager.yml')}`,
        `--storage.path=${join(dir, 'data')}`,
        `--web.listen-address=127.0.0.1:${port}`,
        // A single instance: no gossip port to collide with anything.
        '--cluster.listen-address=',
      ];
    },
    'orchestrator-alertmanager-',
  );
  return {
    address: `127.0.0.1:${port}`,
    log: daemon.log,
    async alerts() {
      return (await (await fetch(`${daemon.url}/api/v2/alerts`)).json()) as ApiAlert[];
    },
    stop: daemon.stop,
  };
}
