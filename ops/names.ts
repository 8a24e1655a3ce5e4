/**
 * Names of the recording rules, `level:metric:operations`: the level is the labels a rule keeps,
 * the operations say what was done (and over which window). The rules and the dashboards both
 * take their names from here.
 */
import type { OpsConfig } from './config.ts';

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
