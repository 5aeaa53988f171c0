import { SANDBOX_HOME } from '../../core/chat-paths.js'
import type { RequestUser } from '../../core/identity.js'
import { storageDrift } from '../../core/storage-layout.js'
import type { ExtraStorage, SandboxDetails, SandboxSpec, SandboxSummary, StorageOwner, TmpfsSpec } from './engine-types.js'
import { chatEnv, containerEnvList, contributedEnv, withheldNames } from './env.js'
import type { EnvContributor } from './types.js'
import { containerLabels, sandboxNames, volumeLabels } from './names.js'

/*
 * The engine-neutral spec of a chat's sandbox (docs/contract.md#sandbox-configuration) and drift detection: a stopped sandbox
 * whose image, mounts, limits, network or config-derived env changed is recreated at its next start
 * (volume and data kept). Each engine maps the spec to its own create call (Docker: docker-create-body.ts).
 */

/** What a sandbox's creation depends on (the plugin options, resolved). */
export interface SandboxSettings {
  image: string
  prefix: string
  /** network name, or 'none' */
  networkMode: string
  memLimit: number
  cpuLimit: number
  pidsLimit: number
  /** extra variables of every container; names a contributor withholds are dropped from it */
  sandboxEnv: Record<string, string>
  /** the plugins' variables (egress proxy, SUBAGENT_CLI) and withheld names (env.ts, docs/engine.md#environment) */
  envContributors: EnvContributor[]
  /** SANDBOX_DISK_LIMIT in bytes; 0 = no disk bounds (no /tmp tmpfs, no quota) */
  diskLimit: number
  /** the engine takes a writable-layer quota (decided at boot, disk-quota.ts) */
  storageQuota?: boolean
  /** the engine can label a sandbox when a chat claims it (names.ts chatLabels): only then do labels name the chat */
  labelsAtClaim?: boolean
}

export const SANDBOX_USER = 'assistant'
export const KEEP_ALIVE_CMD = ['sleep', 'infinity']
export const SHM_SIZE = 256 * 1024 * 1024
/** Upper bound of the /tmp tmpfs: it lives in the sandbox's memory, so it also stays under half of it. */
export const TMPFS_MAX = 1024 * 1024 * 1024

/**
 * /tmp as a sized tmpfs when a disk limit is set: writes there can never reach the host disk. Its
 * pages count against the memory limit, hence min(limit, 1 GiB, memory / 2). Executables are allowed.
 */
export function tmpfsFor (s: Pick<SandboxSettings, 'diskLimit' | 'memLimit'>): Record<string, TmpfsSpec> {
  if (s.diskLimit <= 0) return {}
  const size = Math.max(1024 * 1024, Math.min(s.diskLimit, TMPFS_MAX, Math.floor(s.memLimit / 2)))
  return { '/tmp': { size, mode: 0o1777 } }
}

/**
 * The spec of a chat's sandbox (docs/contract.md#sandbox-configuration). Pure: same inputs, same spec. Its storage is
 * named, never a host path (docs/engine.md#storage): the home volume, the chat's data areas, the server's
 * skills and `extra`, the read-only mounts of extra-mounts.ts. `home`: the chat's home volume when it is not
 * `{prefix}-home-{K}` (a volume claimed from the warm pool, pool.ts), recorded in the chat's record (pool-record.ts).
 */
export function buildSandboxSpec (s: SandboxSettings, chatId: string, user: RequestUser | undefined, now: Date, extra: ExtraStorage[] = [], home?: string): SandboxSpec {
  const names = sandboxNames(s.prefix, chatId)
  const data: StorageOwner = { chat: names.key }
  return {
    name: names.container,
    image: s.image,
    // The image's own entrypoint runs once, with the keep-alive command.
    command: KEEP_ALIVE_CMD,
    hostname: names.hostname,
    user: SANDBOX_USER,
    workdir: SANDBOX_HOME,
    env: sandboxEnvList(s, chatEnv(chatId, user)),
    labels: containerLabels(s.prefix, chatId, s.image, now, s.labelsAtClaim),
    storage: {
      home: { volume: home ?? names.volume, labels: volumeLabels(s.prefix, chatId, s.labelsAtClaim) },
      data,
      skills: true,
      extra: [...extra].sort((a, b) => a.target < b.target ? -1 : a.target > b.target ? 1 : 0)
    },
    tmpfs: tmpfsFor(s),
    limits: {
      memory: s.memLimit,
      cpus: s.cpuLimit,
      pids: s.pidsLimit,
      // Writable-layer quota where the engine enforces one (Docker: overlay2 on xfs with pquota, btrfs, zfs, …).
      disk: s.storageQuota === true && s.diskLimit > 0 ? s.diskLimit : 0,
      shm: SHM_SIZE
    },
    network: s.networkMode,
    security: { dropCapabilities: true, noNewPrivileges: true, init: true, disableIpv6: s.networkMode !== 'none' }
  }
}

/**
 * A sandbox's own environment: the settings' extra variables, then `chat` (the per-chat variables; a pool
 * sandbox has none), then what the plugins contribute; withheld names dropped from every layer.
 */
export function sandboxEnvList (s: Pick<SandboxSettings, 'sandboxEnv' | 'envContributors'>, chat?: Record<string, string>): string[] {
  return containerEnvList(withheldNames(s.envContributors), s.sandboxEnv, chat, contributedEnv(s.envContributors))
}

function envMap (list: string[]): Map<string, string> {
  const m = new Map<string, string>()
  for (const item of list) {
    const eq = item.indexOf('=')
    if (eq > 0) m.set(item.slice(0, eq), item.slice(eq + 1))
  }
  return m
}

/** What an existing sandbox looks like, for drift detection: the engine's details minus identity. */
export type ExistingSandbox = Omit<SandboxDetails, keyof SandboxSummary | 'addresses' | 'oomKilled'>

/**
 * Why an existing (stopped) container no longer matches the settings, or null. Settings fixed at
 * creation (mounts, env, limits, network, image) take effect by recreating it at its next start
 * (docs/contract.md#creation); the volume and data survive. `currentImageId` null = image unknown, not compared.
 * `managedEnv`: the environment names compared (env.ts managedNames: CHAT_ID and the contributors'
 * names, withheld ones included, so a sandbox created while a provider key was in its environment is recreated).
 */
export function configDrift (existing: ExistingSandbox, desired: SandboxSpec, currentImageId: string | null, managedEnv: ReadonlySet<string>): string | null {
  if (currentImageId !== null && existing.imageId !== currentImageId) return 'image changed'
  if (existing.network !== desired.network) return 'network changed'
  if (existing.memory !== desired.limits.memory) return 'memory limit changed'
  // Compared at the engines' granularity (nano-CPUs).
  if (Math.round(existing.cpus * 1e9) !== Math.round(desired.limits.cpus * 1e9)) return 'cpu limit changed'
  if (existing.pids !== desired.limits.pids) return 'pids limit changed'
  // Storage in the request's words (docs/engine.md#storage): the engine read its mounts back by its own mapping.
  const storage = storageDrift(existing.storage, desired.storage)
  if (storage !== null) return `storage changed (${storage})`
  const tmpfs = (m: Record<string, TmpfsSpec>): string => Object.entries(m).sort(([a], [b]) => a < b ? -1 : 1).map(([k, v]) => `${k}=${v.size}:${v.mode}`).join('\n')
  if (tmpfs(existing.tmpfs) !== tmpfs(desired.tmpfs)) return 'tmpfs changed'
  if (existing.diskQuota !== desired.limits.disk) return 'disk quota changed'
  const a = envMap(existing.env)
  const b = envMap(desired.env)
  for (const name of managedEnv) {
    if (a.get(name) !== b.get(name)) return `environment changed (${name})`
  }
  return null
}
