/**
 * Candidates for replaying a recording of the demo service (`npm start -- --record DIR`), by
 * orchestrator: each is the demo's own policy (service/desks/desk-policies.ts, the module the service
 * builds its desks' policy with) with one thing changed. In your own project, import the
 * policies from `conversation-orchestrator` and build your own.
 *
 *   npm run replay -- .tmp/walkthrough/*.ndjson --policy ./examples/record-replay/desk-candidates.ts#baseline
 */
import { deskPolicies } from '../../service/desks/desk-policies.ts';
import { anyOf, tokenBudget } from '../../src/index.ts';

/** The demo's policies as it runs by default (3 desks on fx_desks, 4 on rates_desks, tolerance 0.05): nothing changes. */
export const baseline = deskPolicies(3, 0.05);

/** The demo's policies with the tolerance doubled (0.05 -> 0.1). */
export const looser = deskPolicies(3, 0.1);

/** The demo's policies with a budget of 250,000 tokens per conversation. */
export const budget = {
  fx_desks: anyOf(baseline.fx_desks, tokenBudget({ total: 250_000 })),
  rates_desks: anyOf(baseline.rates_desks, tokenBudget({ total: 250_000 })),
};
