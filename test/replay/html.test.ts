/** The HTML report in a real browser (Debian's Chromium): it renders its chart and risk list, with no console error and no request. */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchChromium } from '../../service/chromium.ts';
import { anyOf, converged, maxDispatches, type TerminationPolicy } from '../../src/index.ts';
import { type RecordedConversation, renderReportHtml, replay } from '../../src/replay/index.ts';

let browser: Browser;
let dir: string;

beforeAll(async () => {
  browser = await launchChromium();
  dir = mkdtempSync(join(tmpdir(), 'replay-html-'));
});

afterAll(async () => {
  await browser?.close();
  rmSync(dir, { recursive: true, force: true });
});

function conversation(i: number): RecordedConversation {
  const count = 3 + (i % 30);
  return {
    version: 1,
    // Ids are data, never markup.
    conversationId: i === 0 ? '<img src=x onerror=alert(1)>' : `c-${i}`,
    orchestrator: 'desks',
    startTimeMs: 1.7e12,
    ending: { reason: 'converged', policy: 'converged', dispatchCount: count, elapsedMs: count },
    dispatches: Array.from({ length: count }, (_, k) => ({
      n: k + 1,
      elapsedMs: k + 1,
      responder: 'a',
      queueDepth: 0,
      record: { spread: 2 ** (count - k - 1) * 0.001 },
    })),
  };
}

describe('the HTML replay report', () => {
  it('renders its chart and risk list in Chromium with no console error and no request', async () => {
    type Spread = { spread: number };
    const candidate = anyOf(
      converged<Spread, undefined>({ measure: (s) => s.projection.spread, tolerance: 0.004 }),
      maxDispatches(20),
    ) as TerminationPolicy<unknown, undefined>;
    const report = await replay(
      Array.from({ length: 300 }, (_, i) => conversation(i)),
      candidate,
    );
    expect(report.risk.count).toBeGreaterThan(0);
    const file = join(dir, 'report.html');
    writeFileSync(file, renderReportHtml(report));
    const page = await browser.newPage();
    const problems: string[] = [];
    const requests: string[] = [];
    page.on('console', (m) => {
      if (m.type() === 'error' || m.type() === 'warning') problems.push(m.text());
    });
    page.on('pageerror', (e) => problems.push(e.message));
    page.on('request', (r) => {
      if (r.url() !== pathToFileURL(file).href) requests.push(r.url());
    });
    await page.goto(pathToFileURL(file).href);
    expect(await page.locator('svg#chart circle').count()).toBe(300);
    const box = await page.locator('svg#chart').boundingBox();
    expect(box?.width).toBeGreaterThan(500);
    expect(box?.height).toBeGreaterThan(300);
    // Every point lies inside the chart.
    const inside = await page.$$eval('svg#chart circle', (circles) =>
      circles.every((c) => {
        const x = Number(c.getAttribute('cx'));
        const y = Number(c.getAttribute('cy'));
        return x >= 0 && x <= 640 && y >= 0 && y <= 420;
      }),
    );
    expect(inside).toBe(true);
    expect(await page.locator('svg#chart circle[data-comparison="earlier"]').count()).toBe(
      report.earlier,
    );
    const riskRows = page.locator('h2:has-text("Cut before they converged") + table tbody tr');
    expect(await riskRows.count()).toBe(Math.min(100, report.risk.count));
    expect(await page.locator('img').count()).toBe(0);
    expect(await page.locator('text=<img src=x onerror=alert(1)>').count()).toBeGreaterThan(0);
    expect(problems).toEqual([]);
    expect(requests).toEqual([]);
    await page.close();
  }, 60_000);
});
