/** Fixed dashboard uids: links between the dashboards, the runbook and bookmarks use them. */
export const OVERVIEW_UID = 'orchestrator-overview';
export const RESPONDERS_UID = 'orchestrator-responders';
export const SLO_UID = 'orchestrator-slo';
export const USAGE_UID = 'orchestrator-usage';
export const DURABILITY_UID = 'orchestrator-durability';
