/**
 * Names of the recording rules, `level:metric:operations`: the level is the labels a rule keeps,
 * the operations say what was done (and over which window). The rules and the dashboards both
 * take their names from here, and the words their descriptions write durations and shares in.
 */
import { NAME_PATTERN } from '../src/core/shared/names.ts';
import type { OpsConfig } from './config-types.ts';

/** The labels a rule aggregated by orchestrator keeps: the config's group labels, then `orchestrator`. */
export function byOrchestrator(config: OpsConfig): readonly string[] {
  return [...config.groupLabels, 'orchestrator'];
}

/** The labels a rule aggregated by responder keeps. */
export function byResponder(config: OpsConfig): readonly string[] {
  return [...byOrchestrator(config), 'responder'];
}

/** `level:metric:operations` for a rule keeping `labels`. */
export function recordName(labels: readonly string[], metric: string, operations: string): string {
  return `${labels.join('_')}:${metric}:${operations}`;
}

const UNITS: Readonly<Record<string, string>> = {
  ms: 'millisecond',
  s: 'second',
  m: 'minute',
  h: 'hour',
  d: 'day',
  w: 'week',
  y: 'year',
};

/** `5m` → `5 minutes`, `1h` → `1 hour`; compound durations stay as written. */
export function humanDuration(duration: string): string {
  const m = /^(\d+)(ms|s|m|h|d|w|y)$/.exec(duration);
  if (!m) return duration;
  const n = Number(m[1]);
  return `${n} ${UNITS[m[2] as string]}${n === 1 ? '' : 's'}`;
}

/** A share as the descriptions write it: `0.95` → `95%`, at most four decimals. */
export function percent(share: number): string {
  return `${Number((share * 100).toFixed(4))}%`;
}

/** Responder and model names as the core accepts them (`src/core/shared/validate.ts`). */
export const boundedNamePattern = NAME_PATTERN;
