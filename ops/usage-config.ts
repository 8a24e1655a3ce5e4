/**
 * The checks of the usage options: token thresholds that are positive numbers, and a price table
 * whose every model is a name the telemetry can report and whose every price is a number.
 */

import { describe, expect, OpsConfigError, plainObject } from './check.ts';
import type { OpsConfig } from './config-types.ts';
import { boundedNamePattern } from './names.ts';

const PRICE_KEYS = ['inputPerMillion', 'outputPerMillion'];

function positive(what: string, value: unknown): void {
  expect(
    typeof value === 'number' && Number.isFinite(value) && value > 0,
    what,
    'a positive number',
    value,
  );
}

function keys(what: string, value: object, known: readonly string[]): void {
  const missing = known.find((k) => !Object.hasOwn(value, k));
  const unknown = Object.keys(value).find((k) => !known.includes(k));
  if (missing !== undefined || unknown !== undefined) {
    throw new OpsConfigError(
      `Expected \`${what}\` to have exactly ${known.map((k) => `\`${k}\``).join(' and ')}, got ${describe(value)}`,
    );
  }
}

/** Throws an `OpsConfigError` for the first usage option that is wrong. */
export function checkUsage(config: OpsConfig): void {
  positive('tokenBurn.tokensPerSecond', config.tokenBurn.tokensPerSecond);
  positive('runawayConversations.p95Tokens', config.runawayConversations.p95Tokens);
  const prices = config.prices;
  if (prices === null) return;
  expect(
    typeof prices === 'object' && !Array.isArray(prices),
    'prices',
    'a price table `{ currency, models }` or null',
    prices,
  );
  keys('prices', prices, ['currency', 'models']);
  expect(
    typeof prices.currency === 'string' && /^[A-Z]{3}$/.test(prices.currency),
    'prices.currency',
    'an ISO 4217 currency code such as `USD`',
    prices.currency,
  );
  const models = prices.models;
  expect(
    typeof models === 'object' &&
      models !== null &&
      !Array.isArray(models) &&
      Object.keys(models).length > 0,
    'prices.models',
    'an object with at least one model',
    models,
  );
  for (const [model, price] of Object.entries(models)) {
    expect(
      boundedNamePattern.test(model),
      'prices.models',
      'keyed by model names as the telemetry reports them (1-64 letters, digits, `_`, `.`, `:` or `-`)',
      model,
    );
    const what = `prices.models[${JSON.stringify(model)}]`;
    plainObject(what, price);
    keys(what, price, PRICE_KEYS);
    for (const key of PRICE_KEYS) {
      const v = (price as Record<string, unknown>)[key];
      expect(
        typeof v === 'number' && Number.isFinite(v) && v >= 0,
        `${what}.${key}`,
        'a non-negative number (the price of a million tokens)',
        v,
      );
    }
  }
}
