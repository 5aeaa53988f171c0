import type { Readable, Writable } from 'node:stream'

/*
 * The engine interface (docs/contract.md#engines): what the sandbox core asks of a container engine. The Docker
 * engine (plugins/sandbox-docker) is the first; a Kubernetes engine would implement the same calls
 * and pass the same contract suite (test/fixtures/engine-contract.ts). Engine-neutral words only:
 * a sandbox is whatever the engine runs (a container, a pod), ids are the engine's own.
 */

/** A mount of a sandbox: a named volume (the chat's home) or a host path bound in. */
export interface SpecMount {
  type: 'bind' | 'volume'
  /** volume name, or the host path as the engine sees it */
  source: string
  /** absolute path inside the sandbox */
  target: string
  readOnly: boolean
  /** labels of a volume the engine creates on first use */
  volumeLabels?: Record<string, string>
}

/** What a sandbox is created from: everything the core decides, nothing engine-specific. */
export interface SandboxSpec {
  /** the engine-level name (unique per engine; a second create with it is a conflict) */
  name: string
  image: string
  /** the main process (the image's entrypoint runs it) */
  command: string[]
  hostname: string
  user: string
  workdir: string
  /** `KEY=value` entries */
  env: string[]
  labels: Record<string, string>
  mounts: SpecMount[]
  /** in-memory filesystems: target → mount options (e.g. `rw,nosuid,nodev,size=…,mode=1777`) */
  tmpfs: Record<string, string>
  limits: {
    /** bytes of memory (and of memory + swap: no swap) */
    memory: number
    cpus: number
    /** processes and threads */
    pids: number
    /** bytes of the sandbox's writable filesystem; 0 = no quota */
    disk: number
    /** bytes of /dev/shm */
    shm: number
  }
  /** network to join; 'none' = no network at all */
  network: string
  security: {
    /** drop every Linux capability */
    dropCapabilities: boolean
    /** no privilege gain through setuid binaries */
    noNewPrivileges: boolean
    /** a minimal init as PID 1 (reaps zombies) */
    init: boolean
    /** no IPv6 inside the sandbox (no link-local path beside the firewalled IPv4 one) */
    disableIpv6: boolean
  }
}

/** One sandbox as a listing shows it. */
export interface SandboxSummary {
  /** the engine's id */
  id: string
  /** the engine-level name (spec.name, or the name given by claim) */
  name: string
  running: boolean
  labels: Record<string, string>
  /** address per attached network, when the listing reports it (empty when stopped) */
  addresses?: Record<string, string>
}

/** One sandbox as inspected: what drift detection compares with the desired spec. */
export interface SandboxDetails extends SandboxSummary {
  /** image id the sandbox runs (sha256:…) */
  imageId: string
  env: string[]
  mounts: Array<{ type: string, source: string, target: string, readOnly: boolean }>
  /** the network it was created on ('none' without one) */
  network: string
  /** address per attached network (empty when stopped) */
  addresses: Record<string, string>
  /** limits as created (0 = unlimited) */
  memory: number
  cpus: number
  pids: number
  /** tmpfs mounts: target → options */
  tmpfs: Record<string, string>
  /** writable-layer quota in bytes as created (0 when none) */
  diskQuota: number
  /** the main process was killed for lack of memory (the last stop) */
  oomKilled: boolean
}

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
  /** the host's address on the network, null when the engine reports none */
  gateway: string | null
  subnet: string | null
  /** host interface of the network (firewall rules) */
  bridge: string
}

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

export interface VolumeSummary { name: string, labels: Record<string, string>, createdAt?: string }

export interface ExecSpec {
  argv: string[]
  user?: string
  cwd?: string
  /** `KEY=value` entries */
  env?: string[]
  /** attach stdin (ExecProcess.stdin is writable; end() closes the process's stdin) */
  stdin?: boolean
  tty?: boolean
  /** the caller's cancellation: also ends the wait for an exec slot */
  signal?: AbortSignal
  /** absolute deadline (ms, Date.now clock) for the wait and the set-up: the caller's own timeout */
  deadline?: number
}

/** Output stream ids of an exec: 1 stdout, 2 stderr. */
export type ExecOutput = 1 | 2

/** How a process ended, as far as the engine knows. */
export interface ExecExit {
  /**
   * Its exit status; null when unknown: the output was lost, the caller closed the process before it
   * ended, the sandbox stopped under it, or it never started.
   */
  code: number | null
  /** The engine never started it (the sandbox had no process or memory left): nothing of it ran. */
  notStarted: boolean
}

/** Signals a caller may send to a process. */
export type ExecSignal = 'HUP' | 'INT' | 'TERM' | 'KILL'

/**
 * A started process. Its output arrives on `stdout` and `stderr` (with a TTY everything is stdout
 * and stderr only ends): read both, a stream left paused holds the process's output back as far as
 * the engine can. How the bytes travel (Docker's attach framing, a websocket, a pipe) is the
 * engine's business.
 */
export interface ExecProcess {
  /** The process's stdin when ExecSpec.stdin (end() closes it); null otherwise. */
  readonly stdin: Writable | null
  readonly stdout: Readable
  readonly stderr: Readable
  /**
   * Settles (never rejects) once the output streams ended and the engine knows how the process
   * ended, or right after close(). The engine waits for a status it reports late.
   */
  readonly exit: Promise<ExecExit>
  /** Whether the process exists yet: false while the engine still tries to start it (no process or memory left). */
  started: () => Promise<boolean>
  /** The TTY's size (no-op without a TTY). */
  resize: (cols: number, rows: number) => Promise<void>
  /** Sends `signal` to the process and to the processes it started that kept its environment. */
  signal: (signal: ExecSignal) => Promise<void>
  /** Detaches: ends the streams (the process gets EOF or SIGHUP as the engine delivers it); `exit` then settles at once. */
  close: () => void
}

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
  /** missing is success */
  removeNetwork: (idOrName: string) => Promise<void>
  /** 'conflict' when the name is taken. */
  create: (spec: SandboxSpec) => Promise<{ id: string } | 'conflict'>
  /** running already is success */
  start: (id: string) => Promise<void>
  /** stopped already is success; false when the sandbox does not exist */
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
  /** Drops pooled connections (streams in use are ended by their owners). */
  close: () => void
}
