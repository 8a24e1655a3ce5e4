/**
 * The /ws handshake's decisions (service/live/handshake.ts), without a socket: which upgrade is
 * refused first and how, and what a subscription value asks for. The service-level tests
 * (robustness, network) check the same answers over real connections.
 */
import type { IncomingMessage } from 'node:http';
import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { HostAllowlist } from '../../service/http/hosts.ts';
import {
  type Admission,
  subscription,
  upgradeRefusal,
  writeRefusal,
} from '../../service/live/handshake.ts';

/** An upgrade request as Node hands it over: only what the checks read. */
function upgrade(headers: Record<string, string>, httpVersion = '1.1'): IncomingMessage {
  return {
    url: '/ws',
    httpVersion,
    headers,
    rawHeaders: Object.entries(headers).flat(),
    socket: { remoteAddress: '127.0.0.1' },
  } as unknown as IncomingMessage;
}

const GOOD = { host: 'localhost:9464', 'sec-websocket-version': '13' };
const WS = { pathname: '/ws', searchParams: new URLSearchParams() };
const OPEN: Admission = {
  hosts: new HostAllowlist(['localhost']),
  closing: false,
  clients: 0,
  maxClients: 2,
  clientsFrom: () => 0,
  maxClientsPerAddress: 1,
};

describe('the /ws handshake', () => {
  it('accepts a well-formed upgrade, and refuses each fault with its status and counted reason', () => {
    expect(upgradeRefusal(WS, upgrade(GOOD), OPEN)).toBeUndefined();
    const refused = (
      target: typeof WS | undefined,
      headers: Record<string, string>,
      admission: Partial<Admission> = {},
      httpVersion = '1.1',
    ) => {
      const r = upgradeRefusal(target, upgrade(headers, httpVersion), { ...OPEN, ...admission });
      return r === undefined ? undefined : [r.status, r.reason ?? null];
    };
    expect(refused(undefined, GOOD)).toEqual([400, 'bad_target']);
    expect(refused(WS, { ...GOOD, host: 'evil.example' })).toEqual([421, 'host_not_allowed']);
    // A wrong path is answered, not counted.
    expect(refused({ ...WS, pathname: '/other' }, GOOD)).toEqual([404, null]);
    expect(refused(WS, GOOD, {}, '1.0')).toEqual([400, 'bad_handshake']);
    expect(refused(WS, { host: GOOD.host })).toEqual([400, 'bad_handshake']);
    expect(refused(WS, { ...GOOD, 'sec-websocket-version': '8' })).toEqual([426, 'bad_handshake']);
    expect(refused(WS, { ...GOOD, origin: 'http://evil.example' })).toEqual([403, 'cross_origin']);
    expect(refused(WS, GOOD, { closing: true })).toEqual([503, null]);
    expect(refused(WS, GOOD, { clients: 2 })).toEqual([503, 'over_capacity']);
    expect(refused(WS, GOOD, { clientsFrom: (a) => (a === '127.0.0.1' ? 1 : 0) })).toEqual([
      503,
      'address_over_capacity',
    ]);
    // The first fault in the order checked is the one answered: the Host before the capacity.
    expect(refused(WS, { ...GOOD, host: 'evil.example' }, { clients: 2 })).toEqual([
      421,
      'host_not_allowed',
    ]);
  });

  it('answers a refusal in plain HTTP, with its extra headers, then closes', async () => {
    const socket = new PassThrough();
    const chunks: Buffer[] = [];
    socket.on('data', (c: Buffer) => chunks.push(c));
    const closed = new Promise((r) => socket.once('close', r));
    const refusal = upgradeRefusal(WS, upgrade({ ...GOOD, 'sec-websocket-version': '7' }), OPEN);
    writeRefusal(socket, refusal ?? { status: 0, why: '' });
    await closed;
    expect(Buffer.concat(chunks).toString()).toBe(
      'HTTP/1.1 426 Upgrade Required\r\nConnection: close\r\nSec-WebSocket-Version: 13\r\n' +
        'Content-Type: text/plain\r\nContent-Length: 39\r\n\r\nonly WebSocket version 13 is supported\n',
    );
  });

  it('subscribes to everything, or to one known orchestrator; else says why in at most 123 bytes', () => {
    const known = ['fx_desks', 'rates_desks'];
    expect(subscription([], known)).toEqual({ filter: undefined });
    expect(subscription(['fx_desks'], known)).toEqual({ filter: 'fx_desks' });
    expect(subscription(['bond_desks'], known)).toEqual({
      refused: 'Expected orchestrator to be one of fx_desks, rates_desks, got `bond_desks`',
    });
    expect(subscription(['fx_desks', 'fx_desks'], known)).toEqual({
      refused: 'Expected orchestrator to be one of fx_desks, rates_desks, got 2 values',
    });
    // Not an identifier: described by its length in code points, never echoed.
    expect(subscription(['<script>é'], known)).toEqual({
      refused:
        'Expected orchestrator to be one of fx_desks, rates_desks, got a value of 9 characters',
    });
    const many = Array.from({ length: 20 }, (_, i) => `orchestrator_${i}`);
    const long = subscription(['nope'], many);
    expect('refused' in long && Buffer.byteLength(long.refused)).toBe(123);
    expect('refused' in long && long.refused.endsWith('...')).toBe(true);
  });
});
