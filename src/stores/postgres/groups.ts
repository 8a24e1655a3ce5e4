/**
 * The group commit's grouping, for commits and appends alike: a turn's items in statements of at
 * most `max`, at most one item per conversation in each (a conversation's later item waits for
 * its earlier one's answer, so its seq follows).
 */
export function sendInGroups<I>(
  pending: I[],
  idOf: (item: I) => string,
  max: number,
  send: (group: I[]) => Promise<void>,
  requeue: (items: I[]) => void,
): void {
  let left = pending;
  while (left.length > 0) {
    const group: I[] = [];
    const waiting: I[] = [];
    const rest: I[] = [];
    const ids = new Set<string>();
    for (const item of left) {
      const id = idOf(item);
      if (ids.has(id)) waiting.push(item);
      else if (group.length < max) {
        ids.add(id);
        group.push(item);
      } else rest.push(item);
    }
    left = rest;
    const sent = send(group);
    if (waiting.length > 0) void sent.then(() => requeue(waiting));
  }
}
