import type { Socket } from 'node:net'
import type { Duplex } from 'node:stream'
import type { SandboxDetails, SandboxSpec, SandboxSummary, StorageOwner } from './engine-sandbox.js'
import type { ExecProcess, ExecSpec } from './engine-process.js'
import type { DiskUsageReport, EngineNetwork, ResourceStats, StorageInfo, VolumeSummary } from './engine-resources.js'
import type { LeaseAnswer, LeaseHolder } from './engine-lease.js'

export type * from './engine-sandbox.js'
export type * from './engine-process.js'
export type * from './engine-resources.js'
export type * from './engine-lease.js'

/*
 * The engine interface (docs/contract.md#engines): what the sandbox core asks of a container engine. The Docker
 * engine (plugins/sandbox-docker) is the first; a Kubernetes engine would implement the same calls
 * and pass the same contract suite (test/fixtures/engine-contract.ts). Engine-neutral words only:
 * a sandbox is whatever the engine runs (a container, a pod), ids are the engine's own.
 *
 * This file holds the interface and its failures; the shapes it speaks in live beside it by topic and
 * are re-exported here, so `engine-types.ts` stays the one import of the contract: engine-sandbox.ts
 * (spec, summary, details), engine-process.ts (exec), engine-resources.ts (network, volumes, stats,
 * storage), engine-lease.ts (leases).
 */

/**
 * Why a call failed, in the core's words. The engine sets `reason` when it recognised the failure;
 * `statusCode` is the engine's HTTP-style answer (404, 409, …) when it gave one.
 */
export type EngineErrorReason =
  /** the sandbox does not exist */
  | 'no-such-sandbox'
  /** the sandbox exists but is not running (stopped, paused, restarting) */
  | 'not-running'
  /** a name or state conflict */
  | 'conflict'
  | 'image-missing'
  | 'network-missing'
  /** the engine refused the writable-layer quota (limits.disk) */
  | 'quota-refused'
  /** putFile: the parent directory does not exist */
  | 'no-such-path'
  /** putFile: the engine refused the write */
  | 'not-permitted'

/** The shape of every error an engine throws (the core recognises it structurally). */
export interface EngineFailure extends Error {
  readonly statusCode: number | undefined
  /** the engine cannot be reached at all (an outage) */
  readonly unavailable: boolean
  /** the engine is alive but did not answer this request in time (load): retriable */
  readonly busy: boolean
  readonly reason?: EngineErrorReason
}

/** A running sandbox's own address as the server reaches it (SandboxEngine.appAddress). */
export interface AppAddress {
  /** an IPv4 or IPv6 address, as the engine recorded it */
  address: string
  /** the sandbox and its attachment to the network: never the same for two holdings of an address */
  generation: string
}

/**
 * The engine. Idempotent where the core relies on it: start of a running sandbox, stop of a stopped
 * one, kill/remove of a missing one succeed. Every failure is an EngineFailure.
 */
export interface SandboxEngine {
  /** short id ('docker'): the /ready check's name */
  readonly name: string
  /** how messages name the engine: 'the Docker engine', host words: 'Docker' */
  readonly label: { engine: string, host: string }
  ping: (timeoutMs?: number) => Promise<void>
  /** Image id, or null when the image is not present. Never pulls. */
  imageId: (image: string) => Promise<string | null>
  /** Creates the isolated sandbox network unless it exists; answers what it is (an old one may not be internal). */
  ensureNetwork: (name: string, labels: Record<string, string>) => Promise<EngineNetwork & { result: 'created' | 'exists' }>
  listNetworks: (labelFilters: string[]) => Promise<Array<{ id: string, name: string }>>
  /**
   * Optional: egress only through the server's proxy (docs/engine.md#network). Closes every path from the
   * sandbox network `network` to the server's host except TCP `port` on the network's gateway (Docker:
   * iptables rules on its bridge; another engine: a network policy). Rejects when it could not (the
   * caller says what stays open); `warnings` name what only partly worked.
   */
  restrictToProxy?: (network: string, port: number) => Promise<{ warnings: string[] }>
  /** missing is success */
  removeNetwork: (idOrName: string) => Promise<void>
  /** 'conflict' when the name is taken. */
  create: (spec: SandboxSpec) => Promise<{ id: string } | 'conflict'>
  /** running already is success; a paused sandbox is resumed (as unpause) */
  start: (id: string) => Promise<void>
  /**
   * Freezes every process of a running sandbox, keeping its memory (Docker: pause; docs/engine.md#what-an-engine-implements).
   * Paused already is success; reason not-running when it is stopped, no-such-sandbox when missing.
   */
  pause: (id: string) => Promise<void>
  /** Thaws a paused sandbox: the same processes go on. Running already is success; not-running when stopped, no-such-sandbox when missing. */
  unpause: (id: string) => Promise<void>
  /** stopped already is success (a paused sandbox is stopped too); false when the sandbox does not exist */
  stop: (id: string, graceSeconds: number) => Promise<boolean>
  /** missing or stopped is success */
  kill: (id: string) => Promise<void>
  /** missing is success; volumes stay */
  remove: (id: string) => Promise<void>
  /** null when it does not exist */
  inspect: (idOrName: string) => Promise<SandboxDetails | null>
  /** every sandbox (any state) carrying all the `key=value` labels */
  list: (labelFilters: string[]) => Promise<SandboxSummary[]>
  /**
   * Gives a running, unclaimed sandbox (the warm pool's) its chat's identity: from then on `inspect(name)`
   * finds it, and it carries `labels` when `labelsAtClaim` (Kubernetes patches them); an engine that
   * cannot change labels after creation (Docker renames) ignores them. 'conflict' when the name is
   * taken, false when the sandbox does not exist.
   */
  claim: (id: string, identity: { name: string, labels: Record<string, string> }) => Promise<true | false | 'conflict'>
  /**
   * Whether claim() sets labels. When false the core puts no chat identity in any sandbox's labels
   * (created or claimed: both look the same), and finds a chat's sandbox by its name and its record.
   */
  readonly labelsAtClaim: boolean
  createVolume: (name: string, labels: Record<string, string>) => Promise<void>
  listVolumes: (labelFilters: string[]) => Promise<VolumeSummary[]>
  /** missing is success */
  removeVolume: (name: string) => Promise<void>
  /** Starts a process; throws reason no-such-sandbox / not-running / conflict when the sandbox is gone or stopped. */
  exec: (id: string, spec: ExecSpec) => Promise<ExecProcess>
  /**
   * Optional: a connection to the sandbox's in-sandbox agent that needs no exec (Docker: a Unix socket
   * the engine listens on in a directory mounted read-only into the sandbox, docs/engine.md#the-agent-socket),
   * authenticated by the engine; the agent's framed protocol starts with its HELLO. Null when the engine
   * has none for this sandbox now (an old image, the agent gone): the core then starts the agent
   * through exec. Each connection is handed out once; the caller destroys it when done.
   */
  agentChannel?: (id: string) => Promise<Duplex | null>
  /**
   * Optional: gives the writable data area (outputs) of `data` to the sandbox user where the engine's storage
   * needs it (Docker: the bind mount's source directory, changed by the server; docs/engine.md#storage). False
   * when the server may not (it is not root). An engine whose storage needs nothing (the in-memory engine)
   * leaves it out; so does one whose platform sets ownership itself.
   */
  giveOutputs?: (data: StorageOwner, ids: { uid: number, gid: number }) => Promise<boolean>
  /** Writes one file (parent dir must exist). */
  putFile: (id: string, path: string, content: Buffer, mode: number, uid: number, gid: number) => Promise<void>
  /** One sample of the sandbox's counters. */
  stats: (id: string) => Promise<ResourceStats>
  /** How many OOM kills the engine saw in the sandbox between the two instants (ms since the epoch). */
  oomKills: (id: string, sinceMs: number, untilMs: number) => Promise<number>
  diskUsage: () => Promise<DiskUsageReport>
  storageInfo: () => Promise<StorageInfo>
  /**
   * Exclusive leases (an instance's SANDBOX_PREFIX; Kubernetes would use a Lease object). Creates the
   * lease `name` for `holder` atomically, renewed at `now`; when it exists, answers its record (null: it
   * vanished meanwhile, try again). `image` is what the engine may build a lock object from.
   */
  acquireLease: (name: string, holder: LeaseHolder, o: { labels: Record<string, string>, image: string, now: number }) => Promise<LeaseAnswer>
  /** Records a renewal at `at`; false when that lease object is gone (someone took it over). */
  renewLease: (token: string, at: number) => Promise<boolean>
  /** Deletes exactly that lease object (release, or the takeover of a stale one); missing is success. */
  breakLease: (token: string) => Promise<void>
  /**
   * Optional: tells `onEnd(id)` at once whenever a sandbox stops running or goes away, whoever did it
   * (Kubernetes: a watch of the sandbox pods: a pod evicted or deleted behind the server's back), so the
   * core forgets its address before the engine can give it to another sandbox (docs/engine.md#network).
   * Returns the unsubscribe. Synchronous; the engine keeps the watch going until then.
   */
  watchSandboxes?: (onEnd: (id: string) => void) => () => void
  /**
   * Optional (docs/engine.md#app-addresses): where the server can open TCP connections to the running sandbox
   * `id` itself on the sandbox network `network`, read from the engine's own records, never from anything the
   * sandbox says. Null when the sandbox is not running (stopped, paused, restarting), has no address on that
   * network, or the server cannot reach that network. `generation` names this address's holding: it differs
   * once the sandbox stopped or left the network, even when it got the same address back, so a caller that
   * reads it again after connecting knows the connection reached this very sandbox.
   */
  appAddress?: (id: string, network: string) => Promise<AppAddress | null>
  /**
   * Optional (docs/network.md#egress-over-the-agent-socket): egress through the server's proxy without a network
   * interface. A sandbox created with network `none` and CUBICLE_EGRESS_PORT in its environment has its agent
   * relay 127.0.0.1:<port> to the engine (Docker: `egress.sock` in the agent socket's run directory, mounted
   * into that sandbox only); the engine hands every such connection to `onConnection` with the id of the
   * sandbox it came from, known from where it arrived, never from anything the sandbox sends, and bounds how
   * many of one sandbox are open. Present only when the engine offers it (Docker: SANDBOX_EGRESS_SOCKET with
   * the agent socket); the core then creates every sandbox without a network and never prepares one for new
   * sandboxes. Synchronous; registers once, while plugins load. The in-memory and Kubernetes engines do not
   * offer it (their sandboxes keep the network path).
   */
  serveEgress?: (onConnection: (id: string, socket: Socket) => void) => void
  /** Drops pooled connections (streams in use are ended by their owners). */
  close: () => void
}
