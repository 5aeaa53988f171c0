/*
 * The engine contract's facts about what sandboxes share (engine-types.ts): the isolated network,
 * volumes, and what the engine measures of sandboxes and of its storage.
 */

/** The isolated network sandboxes join (no route out, sandboxes cannot reach each other). */
export interface EngineNetwork {
  id: string
  /** no route out */
  internal: boolean
  /** sandboxes on it cannot reach each other */
  isolated: boolean
  /** the engine's setting that makes a network isolated, as an operator would write it (messages) */
  isolationSetting: string
  labels: Record<string, string>
  /** the server's address on the network (where a listener of the server is reached from sandboxes), null when the engine reports none */
  gateway: string | null
  /**
   * Where a listener of the server for sandboxes binds when that is not the gateway (Kubernetes: `0.0.0.0`,
   * sandboxes reach the server through a Service's address); absent: the gateway itself
   */
  listen?: string
  subnet: string | null
}

export interface VolumeSummary { name: string, labels: Record<string, string>, createdAt?: string }

/** What the engine itself measures about a sandbox (never what the sandbox reports). */
export interface ResourceStats {
  /** processes and threads in the sandbox, and its limit (0 = unlimited) */
  pids: { current: number, limit: number }
  /** bytes in use without reclaimable page cache, and the limit (0 = unlimited) */
  memory: { usage: number, limit: number }
}

export interface DiskUsageReport {
  /** bytes each sandbox wrote outside its volumes and tmpfs (writable layer) */
  sandboxes: Array<{ id: string, name: string, labels: Record<string, string>, writable: number }>
  /** size of every volume (bytes; -1 when the engine did not compute it) */
  volumes: Array<{ name: string, labels: Record<string, string>, size: number }>
}

export interface StorageInfo {
  /** storage driver: overlay2, btrfs, zfs, … */
  driver: string
  /** filesystem under it as the engine reports it, '' when unknown */
  backingFs: string
  /** a writable-layer quota (limits.disk) is worth trying: the engine may enforce it */
  quota: boolean
}
