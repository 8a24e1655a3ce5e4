/** A page of the live view's browser tests, whose console and page errors are collected. */
import type { Browser, Page } from 'playwright-core';

/** A new 1200 × 900 page of `browser`; `errors` collects its console errors and page errors. */
export async function watchedPage(browser: Browser): Promise<{ page: Page; errors: string[] }> {
  const page = await browser.newPage({ viewport: { width: 1200, height: 900 } });
  const errors: string[] = [];
  page.on('console', (m) => {
    if (m.type() === 'error') errors.push(m.text());
  });
  page.on('pageerror', (e) => errors.push(e.message));
  return { page, errors };
}
