/**
 * A deterministic share of traces by trace id, the rule of OpenTelemetry's consistent probability
 * sampling (W3C Trace Context level 2 random trace ids, OTEP 235): the randomness is the trace
 * id's rightmost 56 bits, and a trace is kept at ratio `r` when that number is at or above the
 * threshold `(1 - r) * 2^56`. Every process of a fleet agrees on every trace, and the traces kept
 * at a ratio are a subset of those kept at any higher ratio.
 */

/** The 56 bits are compared as two 28-bit halves: a double holds 53 bits exactly, not 56. */
const HALF = 2 ** 28;

/** Answers whether a trace id (32 lowercase hex digits) is in the share `ratio` (0 ... 1). */
export function traceIdRatio(ratio: number): (traceId: string) => boolean {
  // (1 - ratio) * 2^56 is a whole double past 2^53 and exact below: BigInt splits it exactly.
  const threshold = BigInt(Math.round((1 - ratio) * 2 ** 56));
  const high = Number(threshold / BigInt(HALF));
  const low = Number(threshold % BigInt(HALF));
  return (traceId) => {
    // Hex digits 18..24 and 25..31: bits 55..28 and 27..0 of the rightmost 56.
    const h = Number.parseInt(traceId.slice(18, 25), 16);
    const l = Number.parseInt(traceId.slice(25, 32), 16);
    // A malformed id (NaN) compares false: not in the share.
    return h > high || (h === high && l >= low);
  };
}
