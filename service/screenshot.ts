/**
 * `npm run screenshot`: starts the demo service, lets the live page run until it shows endings of
 * every kind, and saves a PNG of it for the README (docs/live-page.png; pass another path as the
 * first argument). Regenerate it whenever the page changes.
 */
import { spawn } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { launchChromium } from './chromium.ts';

const OUT = process.argv[2] ?? 'docs/live-page.png';
/** Endings to wait for before the picture: enough that every reason has shown up. */
const ENDINGS = 150;
const DEADLINE_MS = 120_000;
const READY = `(() => {
  const row = document.querySelector('#counts tr[data-orchestrator="all"]');
  if (row === null) return false;
  const count = (reason) => Number(row.querySelector('td[data-reason="' + reason + '"]').textContent);
  const ended = Number(row.querySelector('td[data-reason="share"]').dataset.ended);
  const reasons = ['converged', 'max_dispatches', 'timeout', 'error', 'aborted'];
  return ended >= ${ENDINGS} && reasons.every((reason) => count(reason) > 0);
})()`;

async function main(): Promise<void> {
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', 'service/main.ts', '--port', '0', '--rate', '12', '--progress-s', '60'],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  let browser: Awaited<ReturnType<typeof launchChromium>> | undefined;
  try {
    const url = await new Promise<string>((resolve, reject) => {
      let out = '';
      child.stdout.on('data', (chunk: Buffer) => {
        out += chunk.toString();
        const m = /listening on (http:\/\/[\d.]+:\d+)/.exec(out);
        if (m) resolve(m[1] as string);
      });
      child.once('exit', (code) => reject(new Error(`the service exited (${code}): ${out}`)));
    });
    browser = await launchChromium();
    const page = await browser.newPage({ viewport: { width: 1200, height: 940 } });
    await page.goto(url);
    // Polled from here: the page's CSP (rightly) forbids the eval behind waitForFunction.
    const deadline = performance.now() + DEADLINE_MS;
    while (!(await page.evaluate(READY))) {
      if (performance.now() > deadline) throw new Error(`the page showed too little in time`);
      await sleep(500);
    }
    mkdirSync(dirname(OUT), { recursive: true });
    await page.screenshot({ path: OUT });
    process.stdout.write(`saved ${OUT}\n`);
  } finally {
    await browser?.close();
    if (child.exitCode === null) {
      child.kill('SIGTERM');
      await exited;
    }
  }
}

main().catch((error: unknown) => {
  process.stderr.write(
    `${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
  );
  process.exit(1);
});
