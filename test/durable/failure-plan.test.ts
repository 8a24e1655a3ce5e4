/**
 * The failure plan (src/core/durable/failure-plan.ts): what a durable segment does with the store
 * when it fails, aborts or is drained, case by case. The processes-and-signals tests
 * (test/durable/*) show the plans carried out; this table shows every branch of the decision.
 */
import { describe, expect, it } from 'vitest';
import {
  type CutPoint,
  type FailureFacts,
  type FailurePlan,
  planFailure,
} from '../../src/core/durable/failure-plan.ts';

const base: FailureFacts = {
  leaseLost: false,
  cancel: false,
  unstorable: false,
  aborted: false,
  storeFailed: false,
  cutAt: 'inside',
  exit: false,
  unsaved: false,
  crashMarkUnsaved: false,
  resumedUncommitted: false,
  takenOver: false,
};

const cases: [string, Partial<FailureFacts>, FailurePlan][] = [
  ['another process took it', { leaseLost: true }, 'release'],
  [
    'another process took it, whatever else holds',
    { leaseLost: true, cancel: true, unstorable: true, aborted: true },
    'release',
  ],
  ['an abort with everything committed', { aborted: true, cutAt: 'between' }, 'release'],
  ['an abort while a call is open', { aborted: true, cutAt: 'call' }, 'reopen_then_release'],
  [
    'an abort between steps with calls not committed',
    { aborted: true, cutAt: 'between', unsaved: true },
    'commit_unsaved_then_release',
  ],
  [
    'an abort inside a step with calls not committed',
    { aborted: true, cutAt: 'inside', unsaved: true },
    'mark_abort_then_release',
  ],
  ['an abort inside a step, everything committed', { aborted: true, cutAt: 'inside' }, 'release'],
  [
    'an abort of a takeover whose crash mark is not stored',
    { aborted: true, cutAt: 'between', crashMarkUnsaved: true },
    'commit_unsaved_then_release',
  ],
  [
    'an abort with exit durability, calls not committed',
    { aborted: true, exit: true, cutAt: 'call', unsaved: true },
    'release',
  ],
  [
    'an abort with exit durability, crash mark not stored',
    { aborted: true, exit: true, cutAt: 'between', crashMarkUnsaved: true },
    'mark_abort_then_release',
  ],
  [
    'an abort inside a step of a takeover whose crash mark is not stored',
    { aborted: true, cutAt: 'inside', crashMarkUnsaved: true },
    'mark_abort_then_release',
  ],
  ['a store failure with everything committed', { storeFailed: true, cutAt: 'between' }, 'release'],
  ['a store failure while a call is open', { storeFailed: true, cutAt: 'call' }, 'lapse'],
  [
    'a store failure with calls not committed',
    { storeFailed: true, cutAt: 'between', unsaved: true },
    'lapse',
  ],
  [
    'a store failure with exit durability',
    { storeFailed: true, exit: true, cutAt: 'call', unsaved: true },
    'release',
  ],
  [
    'an unstorable state',
    { storeFailed: true, unstorable: true, cutAt: 'between' },
    'commit_ended',
  ],
  [
    'an unstorable state of a resumed segment',
    { storeFailed: true, unstorable: true, resumedUncommitted: true },
    'commit_ended',
  ],
  [
    'a cancel() segment that aborts',
    { cancel: true, aborted: true, cutAt: 'call' },
    'commit_ended',
  ],
  [
    'a cancel() segment of a resumed conversation',
    { cancel: true, aborted: true, resumedUncommitted: true },
    'commit_ended',
  ],
  ['a responder error', {}, 'commit_ended'],
  [
    'a responder error in a resumed segment before its first commit',
    { resumedUncommitted: true },
    'release',
  ],
  [
    'a responder error in a takeover before its first commit',
    { resumedUncommitted: true, takenOver: true },
    'lapse',
  ],
];

describe('planFailure', () => {
  it.each(cases)('%s', (_name, facts, plan) => {
    expect(planFailure({ ...base, ...facts })).toBe(plan);
  });

  it('answers one of its six plans for every combination of facts', () => {
    const plans = new Set<FailurePlan>();
    const flags = [
      'leaseLost',
      'cancel',
      'unstorable',
      'aborted',
      'storeFailed',
      'exit',
      'unsaved',
      'crashMarkUnsaved',
      'resumedUncommitted',
      'takenOver',
    ] as const;
    for (let bits = 0; bits < 1 << flags.length; bits++) {
      for (const cutAt of ['call', 'between', 'inside'] as CutPoint[]) {
        const facts = { ...base, cutAt } as Record<string, unknown>;
        flags.forEach((flag, i) => {
          facts[flag] = (bits & (1 << i)) !== 0;
        });
        const plan = planFailure(facts as unknown as FailureFacts);
        plans.add(plan);
        // Nothing is committed over another process's lease, nor an ending for a resumable abort.
        if (facts.leaseLost) expect(plan).toBe('release');
        if (facts.aborted && !facts.cancel && !facts.unstorable && !facts.leaseLost)
          expect(plan).not.toBe('commit_ended');
        // A point inside a step is never committed.
        if (cutAt === 'inside') {
          expect(plan).not.toBe('reopen_then_release');
          expect(plan).not.toBe('commit_unsaved_then_release');
        }
        // Only an abort is marked; a lease lapses only after a store failure or a takeover's failure.
        if (plan === 'mark_abort_then_release') expect(facts.aborted).toBe(true);
        if (plan === 'lapse')
          expect(facts.aborted && !facts.cancel && !facts.unstorable).toBe(false);
      }
    }
    expect([...plans].sort()).toEqual([
      'commit_ended',
      'commit_unsaved_then_release',
      'lapse',
      'mark_abort_then_release',
      'release',
      'reopen_then_release',
    ]);
  });
});
