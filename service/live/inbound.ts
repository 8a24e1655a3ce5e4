/**
 * What a /ws client may send (the endpoint only sends: a client reads): the largest message ws
 * reads, and a budget over every byte and control frame, refilled over time. Past it the client
 * is cut off (`frame_flood`) by LiveUpdates (live.ts).
 */

/**
 * The largest message ws reads from a client, in bytes (a control frame is at most 125 anyway).
 * A frame announcing more is refused from its header with 1009, before its payload is read; a
 * smaller data message is read whole, and its sender is then closed with 1008.
 */
export const MAX_PAYLOAD = 1024;
/**
 * What a client may send, whatever the frame kind (pings, pongs, fragments, close): a budget
 * refilled over time, and a client past it is cut off (`frame_flood`). The page sends one
 * 14-byte pong per ping and a close frame; a script's keep-alive pings fit many times over. A
 * flood of 125-byte pongs or empty frames spends the burst in well under a second.
 */
export const INBOUND_LIMITS = {
  /** Bytes a client may send at once, and per second after that. */
  burstBytes: 8 * 1024,
  bytesPerSecond: 1024,
  /** Control frames (pings and unsolicited pongs) a client may send at once, and per second. */
  burstFrames: 32,
  framesPerSecond: 2,
} as const;
/** A token bucket over bytes and control frames, refilled on use. */
export class InboundBudget {
  #bytes: number = INBOUND_LIMITS.burstBytes;
  #frames: number = INBOUND_LIMITS.burstFrames;
  #at = performance.now();

  /** Spends what came; false once the client is past its budget. */
  take(bytes: number, frames: number): boolean {
    const now = performance.now();
    const seconds = (now - this.#at) / 1000;
    this.#at = now;
    this.#bytes = Math.min(
      INBOUND_LIMITS.burstBytes,
      this.#bytes + seconds * INBOUND_LIMITS.bytesPerSecond,
    );
    this.#frames = Math.min(
      INBOUND_LIMITS.burstFrames,
      this.#frames + seconds * INBOUND_LIMITS.framesPerSecond,
    );
    this.#bytes -= bytes;
    this.#frames -= frames;
    return this.#bytes >= 0 && this.#frames >= 0;
  }
}
