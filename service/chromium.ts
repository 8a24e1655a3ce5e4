/**
 * Debian's Chromium driven by playwright-core (no browser download: these machines are offline),
 * for the page's browser test and `npm run screenshot`.
 */
import { type Browser, chromium } from 'playwright-core';

/** Where Debian's `chromium` package puts the browser; `CHROMIUM_PATH` overrides it. */
export const CHROMIUM_PATH = process.env.CHROMIUM_PATH || '/usr/bin/chromium';

export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM_PATH,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
}
