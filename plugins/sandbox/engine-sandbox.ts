/*
 * The engine contract's sandbox shapes (engine-types.ts): what a sandbox is created from and how the
 * engine reports one, in a listing and inspected.
 */

import type { SandboxStorage, StorageSeen } from '../../core/storage-layout.js'

/*
 * Storage is asked for by name (docs/engine.md#storage): the chat's home volume, its data areas (a chat's or a
 * pool slot's uploads and outputs), the server's skills and extension mounts; never a host path of a chat.
 * The types live in core/storage-layout.ts beside the host-directory layout that the Docker and in-memory
 * engines and chat-storage share.
 */
export type { ExtraStorage, SandboxStorage, StorageOwner, StorageSeen } from '../../core/storage-layout.js'

/** An in-memory filesystem of a sandbox. */
export interface TmpfsSpec {
  /** bytes */
  size: number
  /** permission bits of its root, e.g. 0o1777 */
  mode: number
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
  /** home, data areas, skills, extension mounts (the engine maps them: Docker to a volume and bind mounts) */
  storage: SandboxStorage
  /**
   * in-memory filesystems: target → size in bytes and permission bits of its root (the engine mounts them
   * writable, without setuid and device files; executables allowed)
   */
  tmpfs: Record<string, TmpfsSpec>
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
  /** its processes run (false while paused) */
  running: boolean
  /** its processes are frozen by pause(), memory kept; absent means false */
  paused?: boolean
  labels: Record<string, string>
  /** address per attached network, when the listing reports it (empty when stopped) */
  addresses?: Record<string, string>
}

/** One sandbox as inspected: what drift detection compares with the desired spec. */
export interface SandboxDetails extends SandboxSummary {
  /** image id the sandbox runs (sha256:…) */
  imageId: string
  env: string[]
  /** its storage read back in the request's words (the engine's own mounts, such as Docker's agent socket, left out) */
  storage: StorageSeen
  /** the network it was created on ('none' without one) */
  network: string
  /** address per attached network (empty when stopped) */
  addresses: Record<string, string>
  /** limits as created (0 = unlimited) */
  memory: number
  cpus: number
  pids: number
  /** tmpfs mounts as created: target → size and mode (as the engine reports them back) */
  tmpfs: Record<string, TmpfsSpec>
  /** writable-layer quota in bytes as created (0 when none) */
  diskQuota: number
  /** the main process was killed for lack of memory (the last stop) */
  oomKilled: boolean
}
