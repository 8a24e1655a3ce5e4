/**
 * The demo service's /metrics beside the conversations': the process's own health, as
 * prom-client's default metrics give it, on the service's registry, in both formats a scraper
 * may ask for, and clean by promtool's lint.
 */
import { spawnSync } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RunningService, startService, stopService, sumSamples } from '../helpers/service.ts';

let service: RunningService | undefined;

beforeAll(async () => {
  service = await startService(['--rate', '20', '--concurrency', '8', '--latency-ms', '1']);
}, 60_000);
afterAll(async () => {
  await stopService(service);
});

const scrape = async (accept?: string) =>
  (
    await fetch(`${(service as RunningService).url}/metrics`, {
      headers: accept === undefined ? {} : { accept },
    })
  ).text();

describe('the demo service’s process metrics', () => {
  it('exposes the process_* and nodejs_* series of the service’s own process', async () => {
    const text = await scrape();
    const families = [...text.matchAll(/^# TYPE ((?:process|nodejs)_\S+) (\S+)$/gm)].map(
      (m) => `${m[1]} ${m[2]}`,
    );
    for (const family of [
      'process_cpu_seconds_total counter',
      'process_resident_memory_bytes gauge',
      'process_start_time_seconds gauge',
      'process_open_fds gauge',
      'nodejs_eventloop_lag_p99_seconds gauge',
      'nodejs_heap_size_used_bytes gauge',
      'nodejs_gc_duration_seconds histogram',
      'nodejs_version_info gauge',
    ])
      expect(families).toContain(family);
    // The numbers are this process's: its resident set, and when it started (within a minute).
    expect(sumSamples(text, 'process_resident_memory_bytes')).toBeGreaterThan(20 * 1024 * 1024);
    const started = sumSamples(text, 'process_start_time_seconds');
    expect(Math.abs(started - Date.now() / 1000)).toBeLessThan(60);
    expect(text).toContain(`nodejs_version_info{version="${process.version}"`);
    // The three gauges named `_total` (a counter's suffix) are left out; their counts by type stay.
    expect(text).not.toMatch(/^nodejs_active_(handles|requests|resources)_total/m);
    expect(text).toMatch(/^nodejs_active_handles\{type="Server"\} 1$/m);
  });

  it('exposes the store’s gauges of the default SQLite store: waiting for approval, the oldest wait, the unleased', async () => {
    // Read from the store at scrape time: once both orchestrators have stored conversations.
    // A scrape whose store read did not answer in time leaves the gauges out (and counts the
    // failure): wait for one where every gauge of both orchestrators is there.
    const all = (t: string) =>
      ['fx_desks', 'rates_desks'].every((o) =>
        ['conversations_suspended', 'oldest_suspended_seconds', 'conversations_unleased'].every(
          (g) => new RegExp(`^orchestrator_${g}\\{orchestrator="${o}"\\} `, 'm').test(t),
        ),
      );
    let text = '';
    for (let i = 0; i < 150; i++) {
      text = await scrape();
      if (all(text)) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    for (const orchestrator of ['fx_desks', 'rates_desks']) {
      expect(text).toMatch(
        new RegExp(
          `^orchestrator_conversations_suspended\\{orchestrator="${orchestrator}"\\} \\d+$`,
          'm',
        ),
      );
      expect(text).toMatch(
        new RegExp(
          `^orchestrator_oldest_suspended_seconds\\{orchestrator="${orchestrator}"\\} [\\d.e-]+$`,
          'm',
        ),
      );
      expect(text).toMatch(
        new RegExp(
          `^orchestrator_conversations_unleased\\{orchestrator="${orchestrator}"\\} \\d+$`,
          'm',
        ),
      );
    }
    expect(text).toMatch(/^orchestrator_store_up\{store="sqlite"\} 1$/m);
    for (const reason of ['timeout', 'error']) {
      expect(text).toMatch(
        new RegExp(
          `^orchestrator_store_read_failures_total\\{store="sqlite",reason="${reason}"\\} 0$`,
          'm',
        ),
      );
    }
  });

  it('passes promtool’s lint, and gives an OpenMetrics scraper the same families', async () => {
    const text = await scrape();
    const lint = spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8' });
    expect(lint.stdout + lint.stderr).toBe('');
    const open = await scrape('application/openmetrics-text;version=1.0.0');
    expect(open).toContain('# TYPE process_cpu_seconds counter\n');
    expect(open).toMatch(/^process_cpu_seconds_total [\d.e-]+$/m);
    expect(open).toMatch(/^nodejs_heap_size_used_bytes \d+$/m);
    expect(open.trimEnd().endsWith('# EOF')).toBe(true);
  });
});
