/*
 * The engine contract's leases (engine-types.ts, prefix-lease.ts): one holder of a name at a time.
 */

/** Who holds a lease: enough for an operator to find that instance. */
export interface LeaseHolder {
  /** random, one per server run */
  id: string
  host: string
  pid: number
  /** RFC 3339 */
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
