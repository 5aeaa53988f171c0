import Type, { type Static } from 'typebox'

/**
 * Options of the sandbox core plugin, fed from AppConfig by fastify.config.ts (docs/contract.md#routes-and-settings). The
 * engine's own options (DOCKER_HOST) belong to the engine plugin (sandbox-docker/schemas.ts).
 * Everything after `sandboxEnv` exists for tests (fast reaper, fake clock) and has production defaults.
 */
export const SandboxOptions = Type.Object({
  image: Type.Optional(Type.String({ default: 'computer-use-sandbox:latest', minLength: 1, description: 'DOCKER_IMAGE' })),
  prefix: Type.Optional(Type.String({ default: 'cu', pattern: '^[a-z0-9][a-z0-9-]{0,19}$', description: 'SANDBOX_PREFIX' })),
  network: Type.Optional(Type.String({ default: '', description: 'SANDBOX_NETWORK; empty = <prefix>-sandboxes' })),
  enableNetwork: Type.Optional(Type.Boolean({ default: true, description: 'ENABLE_NETWORK; false = network mode none' })),
  agent: Type.Optional(Type.Boolean({ default: true, description: 'SANDBOX_AGENT: commands and file operations through cubicle-agent (fallback: an engine exec)' })),
  agentBytesPerSecond: Type.Optional(Type.Integer({ default: 8388608, minimum: 1048576, description: 'SANDBOX_AGENT_MAX_BYTES_PER_SECOND: byte budget of one agent stream (twice as burst)' })),
  dataDir: Type.Optional(Type.String({ default: '/data', minLength: 1, description: 'DATA_DIR (server view)' })),
  memLimit: Type.Optional(Type.Integer({ default: 2147483648, minimum: 6291456, description: 'CONTAINER_MEM_LIMIT bytes (swap equal)' })),
  cpuLimit: Type.Optional(Type.Number({ default: 1, exclusiveMinimum: 0, description: 'CONTAINER_CPU_LIMIT' })),
  pidsLimit: Type.Optional(Type.Integer({ default: 512, minimum: 16, description: 'CONTAINER_PIDS_LIMIT' })),
  diskLimit: Type.Optional(Type.Integer({ default: 10737418240, minimum: 0, description: 'SANDBOX_DISK_LIMIT bytes per chat (home + outputs + writable layer); 0 disables' })),
  createTimeoutS: Type.Optional(Type.Integer({ default: 60, minimum: 1, description: 'CONTAINER_CREATE_TIMEOUT' })),
  idleTimeoutS: Type.Optional(Type.Number({ default: 600, exclusiveMinimum: 0, description: 'CONTAINER_IDLE_TIMEOUT' })),
  pausedTimeoutS: Type.Optional(Type.Number({ default: 3600, minimum: 0, description: 'CONTAINER_PAUSED_TIMEOUT: seconds an idle sandbox stays paused before it is stopped; 0 = stop idle sandboxes instead of pausing them' })),
  maxAgeHours: Type.Optional(Type.Number({ default: 24, exclusiveMinimum: 0, description: 'CONTAINER_MAX_AGE_HOURS' })),
  dataMaxAgeDays: Type.Optional(Type.Number({ default: 7, minimum: 0, description: 'DATA_MAX_AGE_DAYS; 0 disables the purge' })),
  maxRunning: Type.Optional(Type.Integer({ default: 50, minimum: 0, description: 'MAX_RUNNING_SANDBOXES; 0 = unlimited' })),
  leaseTimeoutS: Type.Optional(Type.Integer({ default: 60, minimum: 1, description: 'SANDBOX_LEASE_TIMEOUT: seconds without renewal after which another instance takes the prefix lease' })),
  poolSize: Type.Optional(Type.Integer({ default: 0, minimum: 0, maximum: 20, description: 'SANDBOX_POOL_SIZE: warm sandboxes a new chat claims; 0 disables' })),
  commandTimeoutS: Type.Optional(Type.Integer({ default: 120, minimum: 1, description: 'COMMAND_TIMEOUT: default exec timeout' })),
  uid: Type.Optional(Type.Integer({ default: 0, minimum: 0, description: 'SANDBOX_UID; 0 = discovered from the sandbox' })),
  gid: Type.Optional(Type.Integer({ default: 0, minimum: 0, description: 'SANDBOX_GID; 0 = discovered from the sandbox' })),
  sandboxEnv: Type.Optional(Type.Record(Type.String(), Type.String(), { default: {}, description: 'extra variables of every sandbox container (none by default); names an environment contributor withholds (the sub-agent\'s provider credentials) are dropped from it' })),
  reaperIntervalMs: Type.Optional(Type.Integer({ default: 30000, minimum: 10, description: 'Idle/max-age reaper period' })),
  purgeIntervalMs: Type.Optional(Type.Integer({ default: 3600000, minimum: 10, description: 'Data purge period' })),
  readyTimeoutMs: Type.Optional(Type.Integer({ default: 10000, minimum: 100, description: 'How long `exec true` may fail after a start' })),
  killGraceMs: Type.Optional(Type.Integer({ default: 5000, minimum: 0, description: 'SIGTERM → SIGKILL delay on timeout/abort' })),
  stopGraceS: Type.Optional(Type.Integer({ default: 10, minimum: 0, description: 'stop grace period (seconds)' })),
  diskCheckIntervalMs: Type.Optional(Type.Integer({ default: 30000, minimum: 10, description: 'Disk watchdog period' }))
})
/**
 * The schema's options plus `now` (milliseconds since the epoch; tests inject a movable clock) and
 * `memoryAvailable` (the share of the machine's memory available, 0 to 1; tests inject memory pressure).
 */
export type SandboxOptions = Static<typeof SandboxOptions> & { now?: () => number, memoryAvailable?: () => number }
