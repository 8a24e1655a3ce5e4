/**
 * The live page as a first-time viewer reads it, in Debian's Chromium against the real service:
 * it says what it shows, its caption and counts are what is drawn, no mark is cut off, a
 * conversation in flight shows from its first dispatch, totals since the service started sit
 * beside those since the page opened, and an ending opens its trace. Then a lying service: what
 * it says cannot make a bad link or hang the tab.
 */
import type { Browser, Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { launchChromium } from '../../service/chromium.ts';
import { watchedPage } from '../helpers/browser-page.ts';
import { startFakeLiveService } from '../helpers/fake-live-service.ts';
import { attrs, type OtlpSpan, startOtlpReceiver } from '../helpers/otlp-receiver.ts';
import {
  type RunningService,
  scrape,
  startService,
  stopService,
  sumSamples,
} from '../helpers/service.ts';

const WAIT = { timeout: 30_000 };
let browser: Browser | undefined;
const services: RunningService[] = [];
const pages: Page[] = [];
const cleanups: (() => Promise<void> | void)[] = [];

beforeAll(async () => {
  browser = await launchChromium();
});
afterAll(async () => {
  await browser?.close();
});
afterEach(async () => {
  for (const p of pages.splice(0)) await p.close();
  for (const cleanup of cleanups.splice(0)) await cleanup();
  for (const s of services.splice(0)) await stopService(s);
});

async function service(args: string[], env: NodeJS.ProcessEnv = {}) {
  const s = await startService(args, env);
  services.push(s);
  return s;
}

/** A service that says what `greet` sends each client, serving the real page; closed after the test. */
async function fakeService(greet: (send: (m: object) => void) => void): Promise<string> {
  const fake = await startFakeLiveService(greet);
  cleanups.push(fake.close);
  return fake.url;
}

/** The trace id of the conversation span of `conversationId` the receiver got, if it got it. */
function traceOf(
  receiver: { readonly spans: readonly OtlpSpan[] },
  conversationId: string | null | undefined,
): string | undefined {
  return receiver.spans.find(
    (span) =>
      span.name.startsWith('invoke_workflow ') &&
      attrs(span.attributes)['gen_ai.conversation.id'] === conversationId,
  )?.traceId;
}

/** A page on `url`, failing the test on any console error or page error. */
async function open(url: string): Promise<{ page: Page; errors: string[] }> {
  const { page, errors } = await watchedPage(browser as Browser);
  pages.push(page);
  await page.goto(url);
  await page.locator('#connection[data-state="live"]').waitFor(WAIT);
  return { page, errors };
}

/** [x, y, reason, conversationId, trace link or ''] per end mark, CSS px of the plotting area. */
type Mark = [number, number, string, string, string];
const marksOf = async (page: Page): Promise<Mark[]> =>
  JSON.parse((await page.locator('#chart').getAttribute('data-marks')) ?? '[]');
/** [in flight (1) or finished (0), first dispatch drawn, last dispatch drawn] per line. */
const spansOf = async (page: Page): Promise<[number, number, number][]> =>
  JSON.parse((await page.locator('#chart').getAttribute('data-spans')) ?? '[]');
const caption = (page: Page) =>
  page.locator('#lines').evaluate((el) => ({
    text: el.textContent ?? '',
    total: Number(el.getAttribute('data-total')),
    inFlight: Number(el.getAttribute('data-in-flight')),
    finished: Number(el.getAttribute('data-finished')),
    perOrchestrator: [...el.querySelectorAll('.line-count')].map((c) => [
      c.getAttribute('data-orchestrator'),
      Number(c.getAttribute('data-lines')),
      c.textContent,
    ]),
  }));
/**
 * The caption, the marks, the lines and the boxes of the canvas and of the plotting area, read in
 * one browser round trip: the page redraws between round trips, so four reads could describe
 * four different frames (a loaded run read a caption of 46 lines beside 44 spans).
 */
interface Frame {
  caption: Awaited<ReturnType<typeof caption>>;
  marks: Mark[];
  spans: [number, number, number][];
  canvas: [number, number, number, number];
  over: [number, number, number, number];
}
const frameOf = (page: Page): Promise<Frame> =>
  page.evaluate(`(() => {
    const el = document.querySelector('#lines');
    const chart = document.querySelector('#chart');
    const box = (e) => { const r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
    return {
      caption: {
        text: el.textContent ?? '',
        total: Number(el.getAttribute('data-total')),
        inFlight: Number(el.getAttribute('data-in-flight')),
        finished: Number(el.getAttribute('data-finished')),
        perOrchestrator: [...el.querySelectorAll('.line-count')].map((c) => [
          c.getAttribute('data-orchestrator'), Number(c.getAttribute('data-lines')), c.textContent,
        ]),
      },
      marks: JSON.parse(chart.getAttribute('data-marks') ?? '[]'),
      spans: JSON.parse(chart.getAttribute('data-spans') ?? '[]'),
      canvas: box(chart.querySelector('canvas')),
      over: box(chart.querySelector('.u-over')),
    };
  })()`) as Promise<Frame>;

/** Endings of every orchestrator in a counts table (`#counts`: since the page opened). */
const endedIn = (page: Page, table: string) =>
  page
    .locator(`#${table} tr[data-orchestrator="all"] td[data-reason="share"]`)
    .getAttribute('data-ended')
    .then(Number);

describe('the live page, read by a first-time viewer', () => {
  it('says what it shows, labels its legend values and columns, and puts the service totals beside its own', async () => {
    const s = await service(['--rate', '30', '--concurrency', '12', '--latency-ms', '2']);
    // Endings happen before the page opens: they are the service's, not the page's.
    await expect
      .poll(async () => sumSamples(await scrape(s), 'orchestrator_conversations_ended_total'), WAIT)
      .toBeGreaterThan(20);
    const before = sumSamples(await scrape(s), 'orchestrator_conversations_ended_total');
    const { page, errors } = await open(s.url);
    const about = await page.locator('#about').textContent();
    for (const words of ['simulation', 'trading desks', 'quoting a price', 'spread', 'tolerance'])
      expect(about).toContain(words);
    await expect.poll(async () => (await caption(page)).perOrchestrator.length, WAIT).toBe(2);
    for (const [name, n, text] of (await caption(page)).perOrchestrator)
      expect(text).toBe(`${name}: ${n} ${n === 1 ? 'line' : 'lines'}`);
    expect(await page.locator('#counts-service caption').textContent()).toContain(
      'since the service started',
    );
    expect(await page.locator('#counts caption').textContent()).toContain('since this page opened');
    expect(await page.locator('#counts th abbr').first().getAttribute('title')).toBe(
      'any other ending, such as a deadline',
    );
    expect(await page.locator('#other-note').textContent()).toContain('other: an ending');
    // What the token counts are: no model is called, the desks report simulated usage.
    expect(await page.locator('#tokens-note').isVisible()).toBe(true);
    expect(await page.locator('#tokens-note').textContent()).toMatch(
      /No model is called: each desk stands for an LLM agent and reports the tokens its\s+simulated model would have read and written/,
    );
    // No --trace-url: the page says how to turn the trace links on (and offers none).
    expect(await page.locator('#trace-hint').isVisible()).toBe(false);
    expect(await page.locator('#trace-off').isVisible()).toBe(true);
    const off = ((await page.locator('#trace-off').textContent()) as string).replace(/\s+/g, ' ');
    expect(off).toContain(
      "start the service with --trace-url set to a trace UI's URL with {traceId} in it",
    );
    expect(off).toContain('OTEL_EXPORTER_OTLP_ENDPOINT');
    // Tokens per finished conversation, from the end messages of the lines drawn.
    await expect
      .poll(() => page.locator('#tokens').getAttribute('data-conversations').then(Number), WAIT)
      .toBeGreaterThan(0);
    const tokens = page.locator('#tokens');
    expect(await tokens.textContent()).toMatch(
      /^Tokens per finished conversation drawn \(input \+ output, \d+ conversations?\): median [\d.]+[kM]?, most [\d.]+[kM]?\.$/,
    );
    expect(Number(await tokens.getAttribute('data-median'))).toBeGreaterThan(420);
    expect(Number(await tokens.getAttribute('data-max'))).toBeGreaterThanOrEqual(
      Number(await tokens.getAttribute('data-median')),
    );
    // The service's totals are what it had counted when the page connected, plus what the page
    // saw since: between the scrape before the page opened and the one after.
    await expect.poll(() => endedIn(page, 'counts'), WAIT).toBeGreaterThan(0);
    const [fromService, here] = (await page.evaluate(
      `[document.querySelector('#counts-service tr[data-orchestrator="all"] td[data-reason="share"]').dataset.ended,
        document.querySelector('#counts tr[data-orchestrator="all"] td[data-reason="share"]').dataset.ended].map(Number)`,
    )) as [number, number];
    const after = sumSamples(await scrape(s), 'orchestrator_conversations_ended_total');
    expect(fromService - here).toBeGreaterThanOrEqual(before);
    expect(fromService - here).toBeLessThanOrEqual(after);
    expect(before).toBeGreaterThan(20);
    expect(errors).toEqual([]);
  });

  it('counts its caption from the lines drawn, keeps finished lines with 200 in flight, and puts every mark wholly inside the plot', async () => {
    const s = await service([
      ...['--rate', '400', '--concurrency', '200', '--latency-ms', '5'],
      // Broken feeds end at the first dispatches (a ✕ by the y axis), choppy markets at 400.
      ...['--mix', 'converge=1,never=1,timeout=1,fail=1'],
    ]);
    const { page, errors } = await open(s.url);
    await expect.poll(async () => (await caption(page)).finished, WAIT).toBeGreaterThan(10);
    await expect.poll(async () => (await caption(page)).inFlight, WAIT).toBeGreaterThan(10);
    // Frames are read until marks have shown at both edges of the plot: at dispatch 1 (a feed
    // failing at once) and at the longest line's end (the right edge), at most 150 frames.
    let left = false;
    let right = false;
    for (let round = 0; round < 6 || !(left && right); round++) {
      expect(round).toBeLessThan(150);
      const { caption: c, marks, spans, canvas, over } = await frameOf(page);
      // Every number in the caption is a count of what is drawn.
      expect(c.inFlight + c.finished).toBe(c.total);
      expect(spans.length).toBe(c.total);
      expect(spans.filter(([inFlight]) => inFlight === 1).length).toBe(c.inFlight);
      expect(c.perOrchestrator.reduce((sum, [, n]) => sum + (n as number), 0)).toBe(c.total);
      expect(marks.length).toBe(c.finished);
      expect(c.total).toBeLessThanOrEqual(64);
      // 200 in flight and only some drawn: the caption says of how many.
      expect(c.text).toMatch(
        new RegExp(
          `^${c.total} lines drawn: ${c.inFlight} of \\d+ in flight \\(solid\\), ${c.finished} finished`,
        ),
      );
      // Each mark (radius 4) lies wholly inside the plotting area, clear of the axes: at
      // dispatch 1, at 400 and at the top alike (and so on the canvas).
      const [ol, ot, or, ob] = over;
      for (const [x, y] of marks) {
        expect(x - 4).toBeGreaterThanOrEqual(0);
        expect(ol + x + 4).toBeLessThanOrEqual(or);
        expect(y - 4).toBeGreaterThanOrEqual(0);
        expect(ot + y + 4).toBeLessThanOrEqual(ob);
      }
      expect(or).toBeLessThanOrEqual(canvas[2]);
      // The room kept inside the plot is 7 px (a mark's radius and a rim): a mark within 8 px
      // of an edge is at its first or last dispatch.
      left ||= marks.some(([x]) => x <= 8);
      right ||= marks.some(([x]) => ol + x >= or - 8);
      await new Promise((r) => setTimeout(r, 500));
    }
    expect(errors).toEqual([]);
  }, 120_000);

  it('draws a conversation in flight from its first dispatch when the page opens mid-run', async () => {
    // Choppy markets never converge: each runs to its 3 s timeout, hundreds of dispatches.
    const s = await service([
      ...['--rate', '2', '--concurrency', '4', '--latency-ms', '10', '--mix', 'never=1'],
    ]);
    await new Promise((r) => setTimeout(r, 2_000));
    const { page } = await open(s.url);
    // The first frame after the history: every line in flight starts at dispatch 1.
    await expect.poll(async () => (await spansOf(page)).length, WAIT).toBeGreaterThan(0);
    const spans = (await spansOf(page)).filter(([inFlight]) => inFlight === 1);
    expect(spans.length).toBeGreaterThan(0);
    for (const [, first] of spans) expect(first).toBe(1);
    expect(Math.max(...spans.map(([, , last]) => last))).toBeGreaterThan(40);
  });

  it('holds the chart still under the pointer, names the conversation hovered, and opens its trace from its end mark and from the list', async () => {
    const receiver = await startOtlpReceiver();
    cleanups.push(() => receiver.close());
    const template = `${receiver.url}/trace/{traceId}`;
    const s = await service(
      ['--rate', '20', '--concurrency', '8', '--latency-ms', '2', '--trace-url', template],
      { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_BSP_SCHEDULE_DELAY: '100' },
    );
    const { page, errors } = await open(s.url);
    // The trace UI answers (the receiver does not serve pages).
    await page
      .context()
      .route(`${receiver.url}/trace/**`, (route) => route.fulfill({ body: 'a trace' }));
    expect(await page.locator('#trace-hint').isVisible()).toBe(true);
    expect(await page.locator('#trace-off').isVisible()).toBe(false);
    // A linked mark with no other mark near it (so the pointer can only mean that one).
    const lone = (marks: Mark[]) =>
      marks.find(
        (m) =>
          m[4] !== '' && marks.every((o) => o === m || Math.hypot(o[0] - m[0], o[1] - m[1]) > 12),
      );
    await expect.poll(async () => lone(await marksOf(page)), WAIT).toBeDefined();
    // The pointer on the chart (its top right corner, where no line runs) holds it still: the
    // marks read now are where they are drawn until the pointer leaves, however loaded the
    // machine, whatever the service sends meanwhile. (Without the hold, a redraw between
    // reading a mark and clicking it moved the mark: the click opened nothing.)
    let mark: Mark | undefined;
    let over = { x: 0, y: 0, width: 0, height: 0 };
    await expect
      .poll(async () => {
        await page.mouse.move(0, 0);
        over = (await page.locator('#chart .u-over').boundingBox()) as typeof over;
        await page.mouse.move(over.x + over.width - 2, over.y + 2);
        await page.locator('#chart[data-held="true"]').waitFor(WAIT);
        mark = lone(await marksOf(page));
        return mark;
      }, WAIT)
      .toBeDefined();
    const held = mark as Mark;
    const still = await page.locator('#chart').getAttribute('data-marks');
    await new Promise((r) => setTimeout(r, 1_000));
    expect(await page.locator('#chart').getAttribute('data-marks')).toBe(still);
    expect(await page.locator('#held').isVisible()).toBe(true);
    // Hovering the mark names its conversation under the chart, with its trace link.
    await page.mouse.move(over.x + held[0], over.y + held[1]);
    const hovered = page.locator('#hovered');
    await expect.poll(() => hovered.getAttribute('data-conversation-id'), WAIT).toBe(held[3]);
    expect(await hovered.getAttribute('data-state')).toBe(held[2]);
    const text = (await hovered.textContent()) as string;
    const orchestrator = (await hovered.getAttribute('data-orchestrator')) as string;
    expect(['fx_desks', 'rates_desks']).toContain(orchestrator);
    const dispatches = Number(await hovered.getAttribute('data-dispatches'));
    expect(dispatches).toBeGreaterThan(0);
    expect(text).toMatch(
      new RegExp(
        `^${orchestrator} · ${held[3]} · ${held[2].replaceAll('_', ' ')} after [\\d.]+ s: ${dispatches} dispatch(es)?, spread [\\d.e-]+, [\\d.]+[kM]? tokens · trace$`,
      ),
    );
    expect(await hovered.locator('a').getAttribute('href')).toBe(held[4]);
    // Clicking the mark opens that conversation's trace.
    const [popup] = await Promise.all([
      page.context().waitForEvent('page', WAIT),
      page.mouse.click(over.x + held[0], over.y + held[1]),
    ]);
    const traceId = /\/trace\/([0-9a-f]{32})$/.exec(popup.url())?.[1];
    expect(popup.url()).toBe(template.replace('{traceId}', traceId as string));
    expect(popup.url()).toBe(held[4]);
    await popup.close();
    // The click kept the conversation in the panel; the pointer off the chart lets it move on.
    expect(await hovered.getAttribute('data-pinned')).toBe('true');
    await page.mouse.move(0, 0);
    await page.locator('#chart[data-held="false"]').waitFor(WAIT);
    await expect
      .poll(() => page.locator('#chart').getAttribute('data-marks'), WAIT)
      .not.toBe(still);
    // It is that conversation's trace, as the service exported it.
    await expect.poll(() => traceOf(receiver, held[3]), WAIT).toBe(traceId);
    // The list of slow or failed conversations links each to its trace the same way.
    const entry = page.locator('#recent li[data-conversation-id]:has(a)').first();
    await entry.waitFor(WAIT);
    // One read of the entry and its link (the list may gain an entry between two reads).
    const [id, href, rel] = await entry.evaluate((li) => {
      const a = li.querySelector('a');
      return [li.getAttribute('data-conversation-id'), a?.getAttribute('href'), a?.rel];
    });
    expect(href).toMatch(new RegExp(`^${receiver.url}/trace/[0-9a-f]{32}$`));
    expect(rel).toBe('noopener noreferrer');
    await expect.poll(() => traceOf(receiver, id), WAIT).toBe((href as string).slice(-32));
    expect(errors).toEqual([]);
  });

  it('keeps the slow-or-failed list’s entries while conversations stream, so a person’s press on a trace link opens it', async () => {
    const receiver = await startOtlpReceiver();
    cleanups.push(() => receiver.close());
    const template = `${receiver.url}/trace/{traceId}`;
    // Half the markets fail at once: the list gains an entry every few frames.
    const s = await service(
      [
        ...['--rate', '30', '--concurrency', '12', '--latency-ms', '2'],
        ...['--mix', 'converge=1,fail=1', '--trace-url', template],
      ],
      { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_BSP_SCHEDULE_DELAY: '100' },
    );
    const { page, errors } = await open(s.url);
    await page
      .context()
      .route(`${receiver.url}/trace/**`, (route) => route.fulfill({ body: 'a trace' }));
    await expect.poll(() => page.locator('#recent li a').count(), WAIT).toBeGreaterThan(2);
    // Over 3 s of streaming, only new entries are added to the list (one node each): the
    // entries already shown stay the same nodes. It was rebuilt on every animation frame.
    const seen = (await page.evaluate(`new Promise((resolve) => {
      const list = document.querySelector('#recent');
      const ids = () => [...list.children].map((li) => li.dataset.conversationId);
      const before = new Set(ids());
      const added = [];
      const observer = new MutationObserver((records) => {
        for (const r of records) for (const n of r.addedNodes) added.push(n.dataset.conversationId);
      });
      observer.observe(list, { childList: true });
      setTimeout(() => {
        observer.disconnect();
        resolve({ added, fresh: [...new Set(added)].filter((id) => !before.has(id)).length });
      }, 3000);
    })`)) as { added: string[]; fresh: number };
    expect(seen.fresh).toBeGreaterThan(0);
    expect(seen.added.length).toBe(seen.fresh);
    // A link with the keyboard's focus holds the list still (the oldest entry would otherwise
    // leave, the focus with it), and Enter opens that link.
    await page.locator('#recent li a').first().focus();
    await page.locator('#recent[data-held="true"]').waitFor(WAIT);
    const focused = async () =>
      (await page.evaluate('document.activeElement.getAttribute("href")')) as string | null;
    const link = await focused();
    expect(link).toMatch(new RegExp(`^${receiver.url}/trace/[0-9a-f]{32}$`));
    const newest = () => page.locator('#recent li').first().getAttribute('data-conversation-id');
    const top = await newest();
    await new Promise((r) => setTimeout(r, 1_000));
    expect(await newest()).toBe(top);
    expect(await focused()).toBe(link);
    const [byKey] = await Promise.all([
      page.context().waitForEvent('page', WAIT),
      page.keyboard.press('Enter'),
    ]);
    expect(byKey.url()).toBe(link);
    await byKey.close();
    await page.evaluate('document.activeElement.blur()');
    await page.locator('#recent[data-held="false"]').waitFor(WAIT);
    await expect.poll(newest, WAIT).not.toBe(top);
    // A person's press: the pointer comes to the list (which then holds still), goes to a link,
    // and presses for 80 ms, while conversations go on ending.
    const list = page.locator('#recent');
    const box = (await list.boundingBox()) as { x: number; y: number; width: number };
    await page.mouse.move(box.x + box.width - 4, box.y + 4);
    await page.locator('#recent[data-held="true"]').waitFor(WAIT);
    const target = page.locator('#recent li a').nth(1);
    const href = (await target.getAttribute('href')) as string;
    const at = (await target.boundingBox()) as {
      x: number;
      y: number;
      width: number;
      height: number;
    };
    await page.mouse.move(at.x + at.width / 2, at.y + at.height / 2, { steps: 5 });
    const [byPress] = await Promise.all([
      page.context().waitForEvent('page', WAIT),
      (async () => {
        await page.mouse.down();
        await new Promise((r) => setTimeout(r, 80));
        await page.mouse.up();
      })(),
    ]);
    expect(byPress.url()).toBe(href);
    await byPress.close();
    // Entries that ended meanwhile show once the pointer leaves.
    const held = await newest();
    await page.mouse.move(0, 0);
    await expect.poll(newest, WAIT).not.toBe(held);
    expect(errors).toEqual([]);
  });

  it('works on a phone: at 390 px wide nothing overflows sideways and the list has the width', async () => {
    const s = await service(['--rate', '30', '--concurrency', '12', '--latency-ms', '2']);
    const page = await (browser as Browser).newPage({
      viewport: { width: 390, height: 844 },
      isMobile: true,
      hasTouch: true,
    });
    pages.push(page);
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(e.message));
    await page.goto(s.url);
    await page.locator('#connection[data-state="live"]').waitFor(WAIT);
    await expect
      .poll(() => page.locator('#recent li[data-conversation-id]').count(), WAIT)
      .toBeGreaterThan(0);
    await expect.poll(() => endedIn(page, 'counts'), WAIT).toBeGreaterThan(0);
    const layout = (await page.evaluate(`(() => {
      const width = (sel) => document.querySelector(sel).getBoundingClientRect().width;
      const right = (sel) => document.querySelector(sel).getBoundingClientRect().right;
      return {
        page: document.documentElement.scrollWidth,
        viewport: document.documentElement.clientWidth,
        tables: [...document.querySelectorAll('table')].map((t) => [t.scrollWidth, t.parentElement.clientWidth]),
        widest: Math.max(...[...document.querySelectorAll('body *')].map((e) => e.getBoundingClientRect().right)),
        list: width('#recent'),
        chart: right('#chart canvas'),
      };
    })()`)) as {
      page: number;
      viewport: number;
      tables: [number, number][];
      widest: number;
      list: number;
      chart: number;
    };
    expect(layout.viewport).toBe(390);
    expect(layout.page).toBe(390);
    expect(layout.widest).toBeLessThanOrEqual(390);
    expect(layout.chart).toBeLessThanOrEqual(390);
    // Each table fits its column whole (no scrolling needed to read a share).
    for (const [table, column] of layout.tables) expect(table).toBeLessThanOrEqual(column);
    // The list takes the screen's width (it was squeezed into a strip beside the tables).
    expect(layout.list).toBeGreaterThan(300);
    expect(errors).toEqual([]);
  });
});

describe('the live page and a lying service', () => {
  it('makes no link of a bad template or trace id, bounds a hostile history, and keeps answering', async () => {
    let template = 'javascript:alert(1)//{traceId}';
    const good = 'abcdef0123456789abcdef0123456789';
    const url = await fakeService((send) => {
      send({
        type: 'hello',
        subscribed: '*',
        orchestrators: ['fx_desks'],
        tolerance: 0.05,
        maxDispatches: 400,
        traceUrl: template,
      });
      send({
        type: 'history',
        conversations: [
          {
            orchestrator: 'fx_desks',
            conversationId: 'long',
            fromDispatch: 1,
            spreads: Array(200_000).fill(1),
          },
          { orchestrator: 'fx_desks', conversationId: 'late', fromDispatch: 2 ** 40, spreads: [1] },
          { orchestrator: 'fx_desks', conversationId: 'junk', fromDispatch: 1, spreads: 'x' },
          null,
        ],
        totals: { fx_desks: { converged: -5, error: 2 ** 60, timeout: 3, '<b>': 1 } },
        since: 'never',
      });
      const traceIds = [
        good,
        good.toUpperCase(),
        '0'.repeat(32),
        '"><img src=x onerror=alert(1)>',
        '../../admin',
      ];
      for (const [i, traceId] of traceIds.entries())
        send({
          type: 'end',
          orchestrator: 'fx_desks',
          conversationId: `e${i}`,
          reason: 'error',
          dispatchCount: 3,
          spread: 2,
          elapsedMs: 10,
          traceId,
        });
    });
    const { page, errors } = await open(url);
    await expect.poll(() => page.locator('#recent li[data-conversation-id]').count(), WAIT).toBe(5);
    // A javascript: template is no template: no link anywhere, no hint.
    expect(await page.locator('#recent a').count()).toBe(0);
    expect(await page.locator('#trace-hint').isVisible()).toBe(false);
    expect((await marksOf(page)).every((m) => m[4] === '')).toBe(true);
    // The history's one sane line is drawn, bounded by maxDispatches; the totals keep only
    // sane counts (3 timeouts, and the unknown reason as `other`).
    const spans = await spansOf(page);
    expect(spans.filter(([inFlight]) => inFlight === 1)).toEqual([[1, 1, 400]]);
    const total = (reason: string) =>
      page
        .locator(`#counts-service tr[data-orchestrator="fx_desks"] td[data-reason="${reason}"]`)
        .textContent();
    expect(await total('timeout')).toBe('3');
    expect(await total('other')).toBe('1');
    expect(await total('converged')).toBe('0');
    // An http template: only the valid lower-case id makes a link, exactly the template's.
    template = 'http://127.0.0.1:1/trace/{traceId}?from=live';
    await page.reload();
    await page.locator('#connection[data-state="live"]').waitFor(WAIT);
    await expect.poll(() => page.locator('#recent li[data-conversation-id]').count(), WAIT).toBe(5);
    expect(
      await page
        .locator('#recent a')
        .evaluateAll((links) => links.map((a) => a.getAttribute('href'))),
    ).toEqual([`http://127.0.0.1:1/trace/${good}?from=live`]);
    const t = performance.now();
    await page.evaluate('1');
    expect(performance.now() - t).toBeLessThan(5_000);
    expect(errors).toEqual([]);
  });
});

describe('the live page’s share converged', () => {
  it('is the convergence SLO’s: aborted conversations count neither way, and the column says so', async () => {
    const url = await fakeService((send) => {
      send({ type: 'hello', subscribed: '*', orchestrators: ['fx_desks'], tolerance: 0.05 });
      send({
        type: 'history',
        conversations: [],
        totals: { fx_desks: { converged: 6, aborted: 2, timeout: 2 } },
        since: new Date().toISOString(),
      });
      for (const reason of ['converged', 'aborted'])
        send({
          type: 'end',
          orchestrator: 'fx_desks',
          conversationId: reason,
          reason,
          dispatchCount: 3,
          spread: 0.01,
          elapsedMs: 10,
        });
    });
    const { page, errors } = await open(url);
    const share = (table: string) =>
      page
        .locator(`#${table} tr[data-orchestrator="fx_desks"] td[data-reason="share"]`)
        .evaluate((td) => [
          td.textContent,
          td.getAttribute('data-ended'),
          td.getAttribute('data-counted'),
        ]);
    // Since the service started: 7 converged of 12 ended, 3 aborted: 7 / 9, not 7 / 12.
    await expect.poll(() => share('counts-service'), WAIT).toEqual(['77.8%', '12', '9']);
    // Since the page opened: one converged, one aborted: 100%, not 50%.
    expect(await share('counts')).toEqual(['100.0%', '2', '1']);
    expect(await page.locator('#counts th abbr').nth(1).getAttribute('title')).toBe(
      'converged ÷ every ending but aborted, as the convergence SLO counts',
    );
    expect(await page.locator('#share-note').textContent()).toMatch(
      /aborts left out \(a caller's doing,\s+not the desks'\), the share that converged: the convergence SLO's definition/,
    );
    expect(errors).toEqual([]);
  });
});
