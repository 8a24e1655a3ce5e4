/** Fixed dashboard uids: links between the dashboards, the runbook and bookmarks use them. */
export const OVERVIEW_UID = 'orchestrator-overview';
export const RESPONDERS_UID = 'orchestrator-responders';
export const SLO_UID = 'orchestrator-slo';
export const USAGE_UID = 'orchestrator-usage';
export const DURABILITY_UID = 'orchestrator-durability';

/** Every dashboard as the others' links name it, in the order the links stand. */
export const DASHBOARD_LINKS: readonly (readonly [title: string, uid: string])[] = [
  ['Overview', OVERVIEW_UID],
  ['Responders', RESPONDERS_UID],
  ['SLOs', SLO_UID],
  ['Usage', USAGE_UID],
  ['Durability', DURABILITY_UID],
];
