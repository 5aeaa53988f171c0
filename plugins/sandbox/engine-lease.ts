/*
 * The engine contract's leases (engine-types.ts, prefix-lease.ts): one holder of a name at a time.
 */

/** Who holds a lease: enough for an operator to find that instance. */
export interface LeaseHolder {
  /** random, one per server run */
  id: string
  /** the host's name as a label value (engines keep the holder in labels: docs/engine.md#labels) */
  host: string
  pid: number
  /** RFC 3339 (an engine that keeps it in a label converts: core/label-value.ts labelTime, timeOfLabel) */
  startedAt: string
}

/** A lease as the engine keeps it. */
export interface LeaseRecord {
  holder: LeaseHolder
  /** the holder's last renewal (ms since the epoch, by the holder's clock) */
  renewedAt: number
  /** the engine's handle of this very lease object: renew and break act on it, never on a successor */
  token: string
}

export type LeaseAnswer = { acquired: true, token: string } | { acquired: false, current: LeaseRecord | null }
