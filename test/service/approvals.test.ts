/**
 * The demo's person-in-the-loop endpoint against a store that stops answering: each request is
 * answered 503 within the store timeout and the conversation stays answerable (no false 409).
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { Approvals, RESUME_PATH, serveResume } from '../../service/desks/approvals.ts';
import { HostAllowlist } from '../../service/http/hosts.ts';
import { type ConversationStore, createMemoryStore } from '../../src/index.ts';

let server: Server | undefined;
afterEach(async () => {
  await new Promise<void>((r) => (server === undefined ? r() : server.close(() => r())));
  server = undefined;
});

describe('POST /conversations/:id/resume with a store that never answers', () => {
  it('answers 503 saying the store did not answer, and the next answer is not a 409', async () => {
    const memory = createMemoryStore();
    // Every read hangs: a store whose connection is stuck.
    const hung: ConversationStore = Object.assign(Object.create(memory) as ConversationStore, {
      get: () => new Promise<never>(() => {}),
    });
    const stop = new AbortController();
    const approvals = new Approvals({
      store: hung,
      orchestrators: new Map(),
      timeoutMs: 60_000,
      signal: stop.signal,
      track: () => {},
      publish: () => {},
      storeTimeoutMs: 100,
    });
    const hosts = new HostAllowlist(['localhost', '127.0.0.1']);
    server = createServer((req, res) => {
      const id = RESUME_PATH.exec(req.url ?? '')?.[1] as string;
      serveResume(approvals, hosts, id, req, res);
    });
    await new Promise<void>((r) => server?.listen(0, '127.0.0.1', r));
    const { port } = server.address() as AddressInfo;
    const answer = async () => {
      const res = await fetch(`http://127.0.0.1:${port}/conversations/fx_desks-1/resume`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: '{"decision":"approve"}',
      });
      return { status: res.status, body: await res.json() };
    };
    const expected = {
      status: 503,
      body: {
        error: 'the store failed: the store did not say within 100 ms whether fx_desks-1 waits',
      },
    };
    expect(await answer()).toEqual(expected);
    // Not left "being answered": the same request gets the same 503, not a 409.
    expect(await answer()).toEqual(expected);
  });
});
