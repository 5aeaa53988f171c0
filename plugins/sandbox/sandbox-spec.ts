import { join } from 'node:path'
import { SANDBOX_HOME, SANDBOX_OUTPUTS, SANDBOX_SKILLS, SANDBOX_UPLOADS } from '../../core/chat-paths.js'
import type { RequestUser } from '../../core/identity.js'
import type { SandboxDetails, SandboxSpec, SandboxSummary, SpecMount } from './engine-types.js'
import { chatEnv, containerEnvList, RUN_ONLY } from './env.js'
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
  /** DATA_DIR as the engine sees it */
  dataDirHost: string
  memLimit: number
  cpuLimit: number
  pidsLimit: number
  skillsDirHost: string
  subagentCli: string
  /** extra variables of every container; provider credentials (env.ts RUN_ONLY) are dropped from it */
  sandboxEnv: Record<string, string>
  /** http://<gateway>:<port> of the egress proxy, null when sandboxes have no network */
  egressProxy?: string | null
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
export function tmpfsFor (s: Pick<SandboxSettings, 'diskLimit' | 'memLimit'>): Record<string, string> {
  if (s.diskLimit <= 0) return {}
  const size = Math.max(1024 * 1024, Math.min(s.diskLimit, TMPFS_MAX, Math.floor(s.memLimit / 2)))
  return { '/tmp': `rw,nosuid,nodev,size=${size},mode=1777` }
}

/**
 * The spec of a chat's sandbox (docs/contract.md#sandbox-configuration). Pure: same inputs, same spec. `extra`: read-only
 * mounts of extra-mounts.ts. `home`: the chat's home volume when it is not `{prefix}-home-{K}` (a volume
 * claimed from the warm pool, pool.ts), recorded in the chat's record (pool-record.ts).
 */
export function buildSandboxSpec (s: SandboxSettings, chatId: string, user: RequestUser | undefined, now: Date, extra: SpecMount[] = [], home?: string): SandboxSpec {
  const names = sandboxNames(s.prefix, chatId)
  const chatDir = join(s.dataDirHost, 'chats', names.key)
  const volume = home ?? names.volume
  const mounts: SpecMount[] = [
    { type: 'volume', source: volume, target: SANDBOX_HOME, readOnly: false, volumeLabels: volumeLabels(s.prefix, chatId, s.labelsAtClaim) },
    { type: 'bind', source: join(chatDir, 'uploads'), target: SANDBOX_UPLOADS, readOnly: true },
    { type: 'bind', source: join(chatDir, 'outputs'), target: SANDBOX_OUTPUTS, readOnly: false }
  ]
  if (s.skillsDirHost.trim() !== '') mounts.push({ type: 'bind', source: s.skillsDirHost.trim(), target: SANDBOX_SKILLS, readOnly: true })
  mounts.push(...extra)
  return {
    name: names.container,
    image: s.image,
    // The image's own entrypoint runs once, with the keep-alive command.
    command: KEEP_ALIVE_CMD,
    hostname: names.hostname,
    user: SANDBOX_USER,
    workdir: SANDBOX_HOME,
    env: containerEnvList(s.sandboxEnv, chatEnv(chatId, s.subagentCli, user), proxyEnv(s.egressProxy)),
    labels: containerLabels(s.prefix, chatId, s.image, now, s.labelsAtClaim),
    mounts,
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
 * The variables every common tool reads (curl only reads lower-case http_proxy; npm, pip, git, apt read
 * these); ALL_PROXY is the same proxy's SOCKS5 side (socks5h: names resolved by the proxy), for tools
 * and protocols without an HTTP proxy setting.
 */
const PROXY_VARS = ['HTTP_PROXY', 'HTTPS_PROXY', 'http_proxy', 'https_proxy', 'NO_PROXY', 'no_proxy', 'npm_config_proxy', 'npm_config_https_proxy', 'ALL_PROXY', 'all_proxy']

/** Egress through the server's policy proxy (plugins/egress): the sandbox network has no other way out. */
export function proxyEnv (proxy: string | null | undefined): Record<string, string> {
  if (proxy === null || proxy === undefined) return {}
  const env: Record<string, string> = {}
  for (const name of PROXY_VARS) {
    const lower = name.toLowerCase()
    env[name] = lower === 'no_proxy' ? 'localhost,127.0.0.1,::1' : lower === 'all_proxy' ? proxy.replace(/^http:/, 'socks5h:') : proxy
  }
  return env
}

/**
 * Environment names a container's creation fixes from the configuration (user-derived ones excluded).
 * The provider credentials are compared too: a stopped container created when they were still in the
 * container's environment is recreated at its next start, so they leave it.
 */
const MANAGED_ENV = new Set<string>([...PROXY_VARS, 'CHAT_ID', 'SUBAGENT_CLI', ...RUN_ONLY])

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
 */
export function configDrift (existing: ExistingSandbox, desired: SandboxSpec, currentImageId: string | null): string | null {
  if (currentImageId !== null && existing.imageId !== currentImageId) return 'image changed'
  if (existing.network !== desired.network) return 'network changed'
  if (existing.memory !== desired.limits.memory) return 'memory limit changed'
  // Compared at the engines' granularity (nano-CPUs).
  if (Math.round(existing.cpus * 1e9) !== Math.round(desired.limits.cpus * 1e9)) return 'cpu limit changed'
  if (existing.pids !== desired.limits.pids) return 'pids limit changed'
  const key = (m: { type: string, source: string, target: string, readOnly: boolean }): string => `${m.type}|${m.source}|${m.target}|${String(m.readOnly)}`
  const have = existing.mounts.map(key).sort().join('\n')
  const want = desired.mounts.map(key).sort().join('\n')
  if (have !== want) return 'mounts changed'
  const tmpfs = (m: Record<string, string>): string => Object.entries(m).sort(([a], [b]) => a < b ? -1 : 1).map(([k, v]) => `${k}=${v}`).join('\n')
  if (tmpfs(existing.tmpfs) !== tmpfs(desired.tmpfs)) return 'tmpfs changed'
  if (existing.diskQuota !== desired.limits.disk) return 'disk quota changed'
  const a = envMap(existing.env)
  const b = envMap(desired.env)
  for (const name of MANAGED_ENV) {
    if (a.get(name) !== b.get(name)) return `environment changed (${name})`
  }
  return null
}
