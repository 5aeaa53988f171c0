import { join } from 'node:path'
import { SANDBOX_HOME, SANDBOX_OUTPUTS, SANDBOX_SKILLS, SANDBOX_UPLOADS } from '../../core/chat-paths.js'
import type { RequestUser } from '../../core/identity.js'
import type { ContainerDetails, ContainerSummary } from './docker-client.js'
import { chatEnv, CLI_ALLOWLIST, toEnvList } from './env.js'
import { containerLabels, sandboxNames, volumeLabels } from './names.js'

/** What a container's creation depends on (the plugin options, resolved). */
export interface ContainerSettings {
  image: string
  prefix: string
  /** network name, or 'none' */
  networkMode: string
  /** DATA_DIR as the Docker daemon sees it */
  dataDirHost: string
  memLimit: number
  cpuLimit: number
  pidsLimit: number
  skillsDirHost: string
  subagentCli: string
  sandboxEnv: Record<string, string>
  /** http://<gateway>:<port> of the egress proxy, null when sandboxes have no network */
  egressProxy?: string | null
  /** SANDBOX_DISK_LIMIT in bytes; 0 = no disk bounds (no /tmp tmpfs, no quota) */
  diskLimit: number
  /** the storage driver takes `StorageOpt.size` (decided at boot, disk-quota.ts) */
  storageQuota?: boolean
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
export function tmpfsFor (s: Pick<ContainerSettings, 'diskLimit' | 'memLimit'>): Record<string, string> {
  if (s.diskLimit <= 0) return {}
  const size = Math.max(1024 * 1024, Math.min(s.diskLimit, TMPFS_MAX, Math.floor(s.memLimit / 2)))
  return { '/tmp': `rw,nosuid,nodev,size=${size},mode=1777` }
}

export interface MountSpec { Type: 'bind' | 'volume', Source: string, Target: string, ReadOnly: boolean, VolumeOptions?: { Labels: Record<string, string> } }

/**
 * The create body of a chat's container (surface.md §5.2). Pure: same inputs, same config. `extra`: read-only
 * mounts of extra-mounts.ts. `home`: the chat's home volume when it is not `{prefix}-home-{K}` (a volume
 * claimed from the warm pool, pool.ts), recorded in the `cu.home-volume` label.
 */
export function buildContainerConfig (s: ContainerSettings, chatId: string, user: RequestUser | undefined, now: Date, extra: MountSpec[] = [], home?: string): {
  name: string
  Image: string
  Cmd: string[]
  Hostname: string
  User: string
  WorkingDir: string
  Env: string[]
  Labels: Record<string, string>
  AttachStdin: false
  AttachStdout: false
  AttachStderr: false
  Tty: false
  OpenStdin: false
  HostConfig: Record<string, unknown> & { Mounts: MountSpec[], Tmpfs: Record<string, string>, StorageOpt?: { size: string } }
} {
  const names = sandboxNames(s.prefix, chatId)
  const chatDir = join(s.dataDirHost, 'chats', names.key)
  const volume = home ?? names.volume
  const mounts: MountSpec[] = [
    { Type: 'volume', Source: volume, Target: SANDBOX_HOME, ReadOnly: false, VolumeOptions: { Labels: volumeLabels(s.prefix, chatId) } },
    { Type: 'bind', Source: join(chatDir, 'uploads'), Target: SANDBOX_UPLOADS, ReadOnly: true },
    { Type: 'bind', Source: join(chatDir, 'outputs'), Target: SANDBOX_OUTPUTS, ReadOnly: false }
  ]
  if (s.skillsDirHost.trim() !== '') mounts.push({ Type: 'bind', Source: s.skillsDirHost.trim(), Target: SANDBOX_SKILLS, ReadOnly: true })
  mounts.push(...extra)
  return {
    name: names.container,
    Image: s.image,
    // The image's own ENTRYPOINT runs once, with the keep-alive command.
    Cmd: KEEP_ALIVE_CMD,
    Hostname: names.hostname,
    User: SANDBOX_USER,
    WorkingDir: SANDBOX_HOME,
    Env: toEnvList(s.sandboxEnv, chatEnv(chatId, s.subagentCli, user), proxyEnv(s.egressProxy)),
    Labels: { ...containerLabels(s.prefix, chatId, s.image, now), ...(volume !== names.volume && { 'cu.home-volume': volume }) },
    AttachStdin: false,
    AttachStdout: false,
    AttachStderr: false,
    Tty: false,
    OpenStdin: false,
    HostConfig: {
      Memory: s.memLimit,
      MemorySwap: s.memLimit,
      NanoCpus: Math.round(s.cpuLimit * 1e9),
      PidsLimit: s.pidsLimit,
      SecurityOpt: ['no-new-privileges:true'],
      CapDrop: ['ALL'],
      Privileged: false,
      Init: true,
      ShmSize: SHM_SIZE,
      LogConfig: { Type: 'json-file', Config: { 'max-size': '10m', 'max-file': '3' } },
      RestartPolicy: { Name: 'no' },
      NetworkMode: s.networkMode,
      // No IPv6 link-local path to the host beside the IPv4 one the firewall covers.
      ...(s.networkMode === 'none' ? {} : { Sysctls: { 'net.ipv6.conf.all.disable_ipv6': '1' } }),
      PublishAllPorts: false,
      Mounts: mounts,
      Tmpfs: tmpfsFor(s),
      // Writable-layer quota where the storage driver enforces one (overlay2 on xfs with pquota, btrfs, zfs, …).
      ...(s.storageQuota === true && s.diskLimit > 0 ? { StorageOpt: { size: String(s.diskLimit) } } : {})
    }
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

/** Environment names a container's creation fixes from the configuration (user-derived ones excluded). */
const MANAGED_ENV = new Set<string>([...PROXY_VARS, 'CHAT_ID', 'SUBAGENT_CLI', 'OPENCODE_CONFIG', 'VISION_API_KEY', 'VISION_API_URL', 'VISION_MODEL',
  ...Object.values(CLI_ALLOWLIST).flat()])

function envMap (list: string[]): Map<string, string> {
  const m = new Map<string, string>()
  for (const item of list) {
    const eq = item.indexOf('=')
    if (eq > 0) m.set(item.slice(0, eq), item.slice(eq + 1))
  }
  return m
}

/** What an existing container looks like, for drift detection: the adapter's details minus identity. */
export type ExistingContainer = Omit<ContainerDetails, keyof ContainerSummary | 'addresses' | 'oomKilled'>

/**
 * Why an existing (stopped) container no longer matches the settings, or null. Settings fixed at
 * creation (mounts, env, limits, network, image) take effect by recreating it at its next start
 * (§5.5 item 6); the volume and data survive. `currentImageId` null = image unknown, not compared.
 */
export function configDrift (existing: ExistingContainer, desired: ReturnType<typeof buildContainerConfig>, currentImageId: string | null): string | null {
  if (currentImageId !== null && existing.imageId !== currentImageId) return 'image changed'
  const hc = desired.HostConfig
  if (existing.networkMode !== hc.NetworkMode) return 'network changed'
  if (existing.memory !== hc.Memory) return 'memory limit changed'
  if (existing.nanoCpus !== hc.NanoCpus) return 'cpu limit changed'
  if (existing.pidsLimit !== hc.PidsLimit) return 'pids limit changed'
  const key = (m: { type: string, source: string, target: string, readOnly: boolean }): string => `${m.type}|${m.source}|${m.target}|${String(m.readOnly)}`
  const have = existing.mounts.map(key).sort().join('\n')
  const want = hc.Mounts.map(m => key({ type: m.Type, source: m.Source, target: m.Target, readOnly: m.ReadOnly })).sort().join('\n')
  if (have !== want) return 'mounts changed'
  const tmpfs = (m: Record<string, string>): string => Object.entries(m).sort(([a], [b]) => a < b ? -1 : 1).map(([k, v]) => `${k}=${v}`).join('\n')
  if (tmpfs(existing.tmpfs) !== tmpfs(hc.Tmpfs)) return 'tmpfs changed'
  if (existing.storageSize !== (hc.StorageOpt?.size ?? '')) return 'disk quota changed'
  const a = envMap(existing.env)
  const b = envMap(desired.Env)
  for (const name of MANAGED_ENV) {
    if (a.get(name) !== b.get(name)) return `environment changed (${name})`
  }
  return null
}
