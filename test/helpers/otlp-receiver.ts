import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface OtlpAttribute {
  key: string;
  value: {
    stringValue?: string;
    intValue?: string | number;
    doubleValue?: number;
    boolValue?: boolean;
    arrayValue?: unknown;
  };
}
export interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  attributes: OtlpAttribute[];
  events: { name: string; timeUnixNano: string; attributes: OtlpAttribute[] }[];
  status: { code?: number; message?: string };
}

/** A number data point of an OTLP sum or gauge (JSON: 64-bit integers may come as strings). */
export interface OtlpNumberPoint {
  attributes?: OtlpAttribute[];
  startTimeUnixNano?: string;
  timeUnixNano?: string;
  asInt?: string | number;
  asDouble?: number;
}

/** A histogram data point of OTLP (JSON). */
export interface OtlpHistogramPoint {
  attributes?: OtlpAttribute[];
  count?: string | number;
  sum?: number;
  min?: number;
  max?: number;
  bucketCounts?: (string | number)[];
  explicitBounds?: number[];
}

export interface OtlpMetric {
  name: string;
  description?: string;
  unit?: string;
  sum?: { dataPoints: OtlpNumberPoint[]; aggregationTemporality?: number; isMonotonic?: boolean };
  gauge?: { dataPoints: OtlpNumberPoint[] };
  histogram?: { dataPoints: OtlpHistogramPoint[]; aggregationTemporality?: number };
}

/** One export's metrics of one instrumentation scope. */
export interface OtlpScopeMetrics {
  scope: { name: string; version?: string };
  metrics: OtlpMetric[];
}

/**
 * A real HTTP server that accepts OTLP/HTTP JSON exports, traces (`/v1/traces`, the spans kept)
 * and metrics (`/v1/metrics`, each request's scope metrics kept in order).
 */
export async function startOtlpReceiver(): Promise<{
  url: string;
  spans: OtlpSpan[];
  metrics: OtlpScopeMetrics[][];
  requests: number;
  close: () => Promise<void>;
  server: Server;
}> {
  const state = { spans: [] as OtlpSpan[], metrics: [] as OtlpScopeMetrics[][], requests: 0 };
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      state.requests++;
      const json = String(req.headers['content-type']).includes('json');
      if (req.url === '/v1/metrics' && json) {
        const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
          resourceMetrics: { scopeMetrics: OtlpScopeMetrics[] }[];
        };
        state.metrics.push(body.resourceMetrics.flatMap((rm) => rm.scopeMetrics));
        res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
        return;
      }
      if (req.url !== '/v1/traces' || !json) {
        res.writeHead(415).end();
        return;
      }
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
        resourceSpans: { scopeSpans: { spans: OtlpSpan[] }[] }[];
      };
      for (const rs of body.resourceSpans)
        for (const ss of rs.scopeSpans) state.spans.push(...ss.spans);
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    get spans() {
      return state.spans;
    },
    get metrics() {
      return state.metrics;
    },
    get requests() {
      return state.requests;
    },
    server,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** An OTLP attribute list as a plain object. */
export function attrs(list: OtlpAttribute[] | undefined): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const { key, value } of list ?? []) {
    out[key] =
      value.stringValue ??
      (value.intValue !== undefined ? Number(value.intValue) : undefined) ??
      value.doubleValue ??
      value.boolValue ??
      value.arrayValue;
  }
  return out;
}
