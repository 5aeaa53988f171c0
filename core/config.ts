import Type, { type Static, type TSchema } from 'typebox'
import Value from 'typebox/value'
import { CORE_INVALID_CONFIG, CORE_INVALID_PLUGIN_OPTIONS } from './errors.js'
import type { TrustProxy } from './trust-proxy.js'
import { checkKey, deriveNetwork, deriveOAuth, derivePoolSize, derivePublicBaseUrl, protectedMode, settingsOrigins, skillsCacheHost } from './config-derive.js'

export { MIN_KEY_LENGTH } from './config-derive.js'

/*
 * Every setting the server reads from the environment, with its default, in one schema (docs/contract.md#routes-and-settings).
 * `x-kind` tells the loader how to turn the raw string into the typed value: booleans accept
 * true|false|1|0|yes|no, sizes accept a k|m|g suffix (binary multiples). Unparsable values stop the boot.
 */
const Str = (def: string, description: string) => Type.String({ default: def, description })
const Int = (def: number, description: string, minimum = 0) => Type.Integer({ default: def, minimum, description })
const Size = (def: number, description: string) => Type.Integer({ default: def, minimum: 1, description, 'x-kind': 'size' })
const Bool = (def: boolean, description: string) => Type.Boolean({ default: def, description })

export const ConfigSchema = Type.Object({
  PORT: Int(8081, 'Listen port.', 0),
  HOST: Str('', 'Listen address. Empty = `0.0.0.0` (all interfaces) when `MCP_API_KEY` is set, `127.0.0.1` (loopback only) in open mode; set it explicitly to override either.'),
  PUBLIC_BASE_URL: Str('http://computer-use-server:8081', 'Browser-facing base of every handed-out URL; trailing / stripped.'),
  MCP_API_KEY: Str('', 'Bearer key for /mcp and, as master key, every chat route (only as an `Authorization: Bearer` header, never in `?t=` or a `~` path). At least 32 characters, no whitespace, else the boot stops (`openssl rand -hex 32` makes one). Empty = open mode (development only).'),
  LINK_SIGNING_KEY: Str('', 'Secret the capability-token HMAC key is derived from (scrypt, N=2^15, r=8, salt `cubicle/link-signing/v2`, once at boot); at least 32 characters. Empty = `MCP_API_KEY` is used. Changing either revokes every link.'),
  LINK_TOKEN_TTL: Int(2592000, 'Capability token lifetime in seconds (rounded up to UTC midnight).', 60),
  ALLOWED_ORIGINS: Str('', 'Extra browser origins (comma-separated) allowed, with CORS, on /mcp, every chat route and the terminal and browser WebSockets, beside `PUBLIC_BASE_URL`\'s.'),
  FRAME_ANCESTORS: Str('*', 'CSP frame-ancestors for the preview page and active file content.'),
  SINGLE_USER_MODE: Str('', 'empty (lenient), true (one shared chat) or false (X-Chat-Id required).'),
  DATA_DIR: Str('/data', 'Server-side root of chat data.'),
  DATA_DIR_HOST: Str('', 'The same directory as the Docker daemon sees it; empty = DATA_DIR.'),
  DOCKER_SOCKET: Str('unix:///var/run/docker.sock', 'Docker API endpoint (DOCKER_HOST wins when set).'),
  DOCKER_HOST: Str('', 'Standard Docker endpoint variable; overrides DOCKER_SOCKET when set.'),
  DOCKER_IMAGE: Str('computer-use-sandbox:latest', 'Sandbox image.'),
  SANDBOX_ENGINE: Type.Union(['docker', 'kubernetes'].map(l => Type.Literal(l)), { default: 'docker', description: 'Where sandboxes run: `docker` (one Docker host) or `kubernetes` (one Pod per running sandbox, docs/engine.md#kubernetes).' }),
  KUBE_API_URL: Str('', 'Kubernetes engine: the API server (`https://…`); empty = the in-cluster service account, else the current context of the kubeconfig (`KUBECONFIG`, ~/.kube/config).'),
  KUBE_NAMESPACE: Str('', 'Kubernetes engine: the namespace of sandbox pods, volumes, records and policies; empty = the service account\'s or the context\'s, else `default`.'),
  KUBE_RUNTIME_CLASS: Str('', 'Kubernetes engine: `runtimeClassName` of sandbox pods (e.g. gvisor, kata); empty = the cluster default.'),
  KUBE_STORAGE_CLASS: Str('', 'Kubernetes engine: `storageClassName` of the sandboxes\' volumes (their homes); empty = the cluster default.'),
  KUBE_VOLUME_SIZE: Str('10Gi', 'Kubernetes engine: requested size of each sandbox volume (a Kubernetes quantity).'),
  KUBE_MAX_STARTING: Int(8, 'Kubernetes engine: pods the server brings up at once; more new chats at once queue in order of arrival (each call\'s creation budget, `CONTAINER_CREATE_TIMEOUT`, includes the wait). 0 = no bound (docs/kubernetes.md#settings).'),
  KUBE_SHARED_CLAIM: Str('', 'Kubernetes engine: a ReadWriteMany PersistentVolumeClaim the server mounts at `DATA_DIR`; sandboxes mount their chat\'s uploads (read-only) and outputs, `SKILLS_DIR` and user skills from it by subPath (docs/engine.md#kubernetes). Required for chat sandboxes.'),
  KUBE_SERVER_SELECTOR: Str('', 'Kubernetes engine: labels of the server\'s pods (`a=b,c=d`): the sandbox NetworkPolicy lets sandboxes reach only these pods (and DNS), and only them reach sandboxes.'),
  KUBE_SERVER_ADDRESS: Str('', 'Kubernetes engine: the address sandboxes reach the server at (its Service\'s name or cluster IP; an IPv4 address of a server outside the cluster is also allowed by the NetworkPolicy): where the egress proxy variables point.'),
  SANDBOX_PREFIX: Type.String({ default: 'cu', pattern: '^[a-z0-9][a-z0-9-]{0,19}$', description: 'Prefix of container, volume and network names.' }),
  SANDBOX_NETWORK: Str('', 'Dedicated sandbox network (ICC disabled); empty = <SANDBOX_PREFIX>-sandboxes.'),
  SANDBOX_LEASE_TIMEOUT: Int(60, 'Seconds. One instance per `SANDBOX_PREFIX` on a Docker engine: an instance takes an exclusive lease on its prefix at boot (a never-started container `<SANDBOX_PREFIX>-lease`, labelled with the holder\'s host, pid and start time), renews it every third of this and removes it on a clean shutdown; a second instance with the same prefix refuses to start and names the holder. A lease not renewed for this long, or whose holder\'s process is gone on the same host, is taken over; one that missed two renewals (its holder was killed, e.g. by `docker rm -f` before an update) is waited for until then instead of refusing the start.', 5),
  SANDBOX_UID: Int(0, 'Owner uid of outputs dirs; 0 = discovered from the image.'),
  SANDBOX_GID: Int(0, 'Owner gid of outputs dirs; 0 = discovered from the image.'),
  ENABLE_NETWORK: Bool(true, 'false gives sandboxes network mode none.'),
  EGRESS: Type.Union(['open', 'allowlist', 'off'].map(l => Type.Literal(l)), { default: 'open', description: 'Sandbox egress through the policy proxy: open (public internet; private, loopback, link-local, metadata and host addresses denied), allowlist (only EGRESS_ALLOW), off.' }),
  EGRESS_ALLOW: Str('', 'Allow rules, comma-separated: names (pypi.org, *.example.com, .example.com), IPs and CIDRs, each with optional :port. Address rules also open private and host addresses.'),
  EGRESS_PORT: Int(3128, 'Port of the egress proxy on the sandbox network gateway.', 1),
  EGRESS_MAX_CONNECTIONS: Int(64, 'Open proxy connections per chat.', 1),
  EGRESS_MAX_BYTES_PER_SECOND: Type.Integer({ default: 20971520, minimum: 0, description: 'Bandwidth cap per chat over all its proxied connections, both directions (k/m/g suffix; default 20m = 20 MiB/s); 0 = unlimited.', 'x-kind': 'size' }),
  EGRESS_DNS_SERVERS: Str('', 'DNS servers the egress proxy asks for the names sandboxes connect to (IP or IP:port, IPv6 with a port as [addr]:port; comma or space separated); empty = the servers of /etc/resolv.conf. Names in /etc/hosts answer first.'),
  EGRESS_IDLE_TIMEOUT: Int(300, 'Seconds an idle proxied connection stays open.', 1),
  EGRESS_FIREWALL: Bool(true, 'Install iptables rules so the sandbox network reaches the host only on EGRESS_PORT (needs root on the Docker host).'),
  EGRESS_USERS: Str('', 'Path of a JSON file of per-user egress defaults, {"alice@example.com": {"mode": "allowlist", "allow": ["pypi.org"]}, "@example.com": {"mode": "open"}}; applies to a chat without its own override; re-read when it changes; empty = none.'),
  CONTAINER_MEM_LIMIT: Size(2147483648, 'Memory limit per sandbox (swap equal).'),
  CONTAINER_CPU_LIMIT: Type.Number({ default: 1.0, exclusiveMinimum: 0, description: 'CPUs per sandbox.' }),
  CONTAINER_PIDS_LIMIT: Int(512, 'PID limit per sandbox.', 16),
  SANDBOX_AGENT: Bool(true, 'Run commands and file operations through the in-sandbox agent (one long-lived stream per sandbox) instead of one docker exec each; false, or an image without the agent, uses docker exec.'),
  SANDBOX_AGENT_SOCKET: Bool(true, 'Docker: reach the in-sandbox agent through a Unix socket the server listens on in <DATA_DIR>/run/<token>/ (bind-mounted read-only into the sandbox; the image\'s entrypoint starts the agent), so no exec is needed per sandbox; false where the daemon cannot pass a Unix socket through a bind mount (a daemon in a VM, such as Docker Desktop). An image without the agent socket, or SANDBOX_AGENT=false, uses exec.'),
  SANDBOX_EGRESS_SOCKET: Bool(true, 'Docker, with SANDBOX_AGENT_SOCKET: sandboxes get no network interface (no sandbox network, no iptables rules); their agent relays 127.0.0.1:EGRESS_PORT to the egress proxy over a second socket in their run directory, so the proxy knows the chat from the socket. Starts are faster (no embedded DNS set-up per container). false: sandboxes join the internal sandbox network and reach the proxy on its gateway. See docs/network.md#egress-over-the-agent-socket.'),
  SANDBOX_AGENT_MAX_BYTES_PER_SECOND: Type.Integer({ default: 8388608, minimum: 1048576, 'x-kind': 'size', description: 'What the server reads of one sandbox agent stream per second (k/m/g suffix; at least 1m); twice that may come at once after a quiet spell. Beyond it the stream waits (its sandbox\'s output slows), so a flooding sandbox costs the server little CPU.' }),
  SANDBOX_DISK_LIMIT: Type.Integer({ default: 10737418240, minimum: 0, 'x-kind': 'size', description: 'Disk per chat (home + outputs + everything else it writes; `k`/`m`/`g` suffixes, e.g. `10g`); `/tmp` becomes a tmpfs of min(limit, 1 GiB, memory / 2); a chat over it is stopped and told why; `0` disables. See plugins/sandbox/README.md.' }),
  CONTAINER_CREATE_TIMEOUT: Int(60, 'Seconds a tool call waits for sandbox creation/start.', 1),
  CONTAINER_IDLE_TIMEOUT: Int(600, 'Idle seconds before a sandbox is paused (its processes frozen, memory kept; any access wakes it), or stopped when CONTAINER_PAUSED_TIMEOUT is 0.', 1),
  CONTAINER_PAUSED_TIMEOUT: Int(3600, 'Seconds a paused sandbox is kept before it is stopped (its processes end; files are kept); 0 stops idle sandboxes at once instead of pausing them. Paused sandboxes still count towards MAX_RUNNING_SANDBOXES and are the first to be stopped when it is reached, or when less than 10% of the machine\'s memory is available.', 0),
  CONTAINER_MAX_AGE_HOURS: Type.Number({ default: 24, exclusiveMinimum: 0, description: 'Container age before removal (data kept).' }),
  DATA_MAX_AGE_DAYS: Type.Number({ default: 7, minimum: 0, description: 'Inactivity before volume and data purge; 0 disables.' }),
  MAX_RUNNING_SANDBOXES: Int(50, 'Running sandbox cap; 0 = unlimited.'),
  SANDBOX_POOL_SIZE: Type.String({ default: 'auto', pattern: '^(auto|[0-9]|1[0-9]|20)$', description: 'Warm pool: started, ready sandboxes a new chat claims instead of creating one (a claimed sandbox is named, labelled and looks like a created one); 0 to 20, 0 disables. auto (default): min(2, CPUs, memory / 2 GiB) of the server\'s machine (its cgroup memory limit when lower): 2 on 2 CPUs and 4 GiB or more, 1 on one CPU or 2-4 GiB, 0 below 2 GiB. Pool sandboxes count towards MAX_RUNNING_SANDBOXES headroom only and give way to chats at the cap.' }),
  COMMAND_TIMEOUT: Int(120, 'bash_tool timeout in seconds; also the exec timeout of view, create_file, str_replace.', 1),
  MAX_OUTPUT_CHARS: Int(30000, 'Tool output cap (half head, half tail).', 1000),
  PROGRESS_INTERVAL_SECONDS: Int(15, 'Progress and keep-alive interval in seconds.', 1),
  MCP_MAX_BODY_BYTES: Size(16777216, '/mcp request body limit.'),
  UPLOAD_MAX_BYTES: Size(104857600, 'Upload size limit.'),
  ARCHIVE_MAX_BYTES: Size(2147483648, 'Archive uncompressed size limit.'),
  RESOURCE_READ_MAX_BYTES: Size(10485760, 'resources/read size limit.'),
  CDP_PORT: Int(9222, 'Loopback CDP port inside the sandbox (the live browser, see docs/features.md).', 1),
  APPS_DOMAIN: Str('', 'A domain whose every subdomain (wildcard DNS, and a wildcard certificate behind https) reaches this server: each app preview is then served on its own origin `<chat key>-<port>.<APPS_DOMAIN>` (scheme and port of `PUBLIC_BASE_URL`), sharing no cookies, storage or service workers with the server or other apps; `/apps/<chat>/<port>/` redirects there. Empty = apps under `PUBLIC_BASE_URL/apps/…`, on the server\'s origin (docs/features.md#app-preview-urls).'),
  APPS_MAX_CONNECTIONS: Int(32, 'Open connections to one chat\'s app preview URLs (/apps/<chat>/<port>/, docs/features.md#app-preview-urls); HTTP requests over it wait, WebSockets are refused with 429.', 1),
  APPS_MAX_REQUEST_BYTES: Size(67108864, 'Largest request body relayed to an app (k/m/g suffix); larger is refused with 413.'),
  APPS_MAX_RESPONSE_BYTES: Size(4294967296, 'Largest answer relayed from an app (k/m/g suffix); a larger one is refused (declared length) or cut.'),
  APPS_TIMEOUT: Int(120, 'Seconds an app in a sandbox may take to send the head of its answer (504 after).', 1),
  APPS_IDLE_TIMEOUT: Int(300, 'Seconds a relayed app request or WebSocket may stay without a byte either way before it is closed.', 1),
  TERMINAL_MAX_VIEWERS: Int(8, 'Open web terminals (WebSockets) per chat; more are refused with 429.', 1),
  SUBAGENT_CLI: Str('claude', 'claude, codex or opencode.'),
  SUB_AGENT_TIMEOUT: Int(3600, 'Sub-agent timeout in seconds.', 1),
  SUB_AGENT_MAX_TURNS: Int(25, 'Default max_turns of sub_agent.', 1),
  SUB_AGENT_DEFAULT_MODEL: Str('', 'Claude default model (sonnet when empty); applies to other CLIs only when set.'),
  CODEX_SUB_AGENT_DEFAULT_MODEL: Str('', 'codex default model.'),
  CODEX_MODEL: Str('', 'codex model, also passed through.'),
  OPENCODE_SUB_AGENT_DEFAULT_MODEL: Str('', 'opencode default model.'),
  OPENCODE_MODEL: Str('', 'opencode model, also passed through.'),
  ANTHROPIC_AUTH_TOKEN: Str('', 'claude credential (passed only to sub_agent runs of the claude CLI, never to the sandbox environment).'),
  ANTHROPIC_BASE_URL: Str('', 'claude endpoint; https://api.anthropic.com when a token exists.'),
  ANTHROPIC_MODEL: Str('', 'claude passthrough.'),
  ANTHROPIC_DEFAULT_SONNET_MODEL: Str('', 'claude passthrough; also resolves the sonnet alias.'),
  ANTHROPIC_DEFAULT_OPUS_MODEL: Str('', 'claude passthrough; also resolves the opus alias.'),
  ANTHROPIC_DEFAULT_HAIKU_MODEL: Str('', 'claude passthrough; also resolves the haiku alias.'),
  CLAUDE_CODE_SUBAGENT_MODEL: Str('', 'claude passthrough.'),
  CLAUDE_CODE_DISABLE_EXPERIMENTAL_BETAS: Str('', 'claude passthrough.'),
  DISABLE_PROMPT_CACHING: Str('', 'claude passthrough.'),
  DISABLE_PROMPT_CACHING_SONNET: Str('', 'claude passthrough.'),
  DISABLE_PROMPT_CACHING_OPUS: Str('', 'claude passthrough.'),
  DISABLE_PROMPT_CACHING_HAIKU: Str('', 'claude passthrough.'),
  OPENAI_API_KEY: Str('', 'codex/opencode passthrough.'),
  OPENAI_BASE_URL: Str('', 'codex passthrough.'),
  AZURE_OPENAI_API_KEY: Str('', 'codex passthrough.'),
  AZURE_OPENAI_ENDPOINT: Str('', 'codex passthrough.'),
  AZURE_OPENAI_API_VERSION: Str('', 'codex passthrough.'),
  CODEX_CONFIG_EXTRA: Str('', 'codex passthrough.'),
  OPENROUTER_API_KEY: Str('', 'opencode passthrough.'),
  ANTHROPIC_API_KEY: Str('', 'opencode passthrough.'),
  OPENCODE_CONFIG_EXTRA: Str('', 'opencode passthrough.'),
  VISION_API_KEY: Str('', 'Passed (with URL and model) only to sub_agent runs, and only when set; never to the sandbox environment.'),
  VISION_API_URL: Str('', 'Vision endpoint passed to sub_agent runs.'),
  VISION_MODEL: Str('gpt-4o', 'Vision model passed to sub_agent runs.'),
  MCP_TOKENS_URL: Str('', 'Optional settings service for per-user skills. A request\'s `X-Mcp-Tokens-Url` + `X-Mcp-Tokens-Api-Key` pair overrides it only when the request carries `MCP_API_KEY` or an OAuth token **and** the URL\'s origin is this URL\'s own or listed in `MCP_TOKENS_URL_ALLOW`; otherwise the pair is ignored (logged once per origin).'),
  MCP_TOKENS_API_KEY: Str('', 'Key for the settings service, sent as `X-Internal-Api-Key`; never enters a sandbox.'),
  MCP_TOKENS_URL_ALLOW: Str('', 'Comma-separated origins (`scheme://host[:port]`, no path) that an authenticated request\'s `X-Mcp-Tokens-Url` may point at, besides `MCP_TOKENS_URL`\'s own. Compared as exact origins after URL parsing (no prefix, suffix or user-info tricks). Empty = `MCP_TOKENS_URL`\'s origin only; a bad entry stops the boot.'),
  SKILLS_DIR: Str('', 'Built-in skills tree (server view); empty = read from the sandbox image.'),
  SKILLS_DIR_HOST: Str('', 'Built-in skills tree as the Docker daemon sees it, mounted read-only at /mnt/skills.'),
  SKILLS_CACHE_DIR: Str('', 'User skill cache; empty = <DATA_DIR>/skills-cache.'),
  SKILLS_CACHE_HOST_PATH: Str('', 'Host view of SKILLS_CACHE_DIR for the bind mounts; empty = below DATA_DIR_HOST when the cache is below DATA_DIR, else SKILLS_CACHE_DIR.'),
  SKILLS_CACHE_MAX_BYTES: Size(1073741824, 'Total size of the user skill cache: extracted skills and cached configurations, each file and folder counted as at least 4 KiB (`k`/`m`/`g` suffixes, e.g. `1g`). A new entry first evicts the least recently used ones; a skill mounted by a sandbox that has not stopped, or in use by a call, is never evicted, and a skill that cannot fit is refused (logged). Downloads in progress add at most 2 × (50 MiB + 200 MiB) in `tmp/`.'),
  SKILLS_INCLUDE_EXAMPLES: Bool(false, 'List examples skills in the prompt.'),
  LOG_LEVEL: Type.Union(['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'].map(l => Type.Literal(l)), { default: 'info', description: 'Log level.' }),
  DEBUG_LOGGING: Bool(false, 'Alias for LOG_LEVEL=debug.'),
  TRUST_PROXY: Str('false', 'Which `X-Forwarded-For` entries name the client (used for logs and failed-auth throttling only). `false`: none, the socket peer is the client. A hop count `N` (e.g. `1` behind one reverse proxy): the peer and the next `N-1` entries from the right are proxies, the entry before them is the client; use it only when the port is reachable through those proxies alone. A comma-separated list of addresses/CIDRs (e.g. `10.0.0.0/8,127.0.0.1`; also `loopback`, `linklocal`, `uniquelocal`): hops are skipped from the right while they are in the list. `true` is refused (it would let any client forge its address).'),
  REQUEST_TIMEOUT: Int(300, 'Seconds a client may take to send a whole request, headers and body (300 s carries a 100 MiB upload at about 2.8 Mbit/s); over it the connection gets 408 and is closed. Responses are not limited: SSE streams, long tool calls and WebSockets run as long as they need. `0` = no limit.'),
  OAUTH_ENABLED: Bool(false, 'Run the OAuth 2.1 authorization server so Claude (Desktop, web, mobile) connects by URL alone (see docs/clients.md). Needs `MCP_API_KEY` and an https `PUBLIC_BASE_URL` (http only on loopback), else the boot stops; so does `SINGLE_USER_MODE=true` (every OAuth user would share the `default` computer).'),
  OAUTH_KEY_LOGIN: Bool(true, 'Offer sign-in with the access key on the OAuth sign-in page; `false` leaves only OIDC (then `OIDC_ISSUER` is required).'),
  OAUTH_ACCESS_TOKEN_TTL: Int(3600, 'Lifetime of OAuth access tokens in seconds (at least 60).', 60),
  OAUTH_REFRESH_TOKEN_TTL: Int(2592000, 'Lifetime of an OAuth refresh token in seconds (at least 300); every refresh rotates it and starts a new lifetime, a connection lasts one year at most.', 300),
  OIDC_ISSUER: Str('', 'Upstream OpenID Connect issuer for the sign-in page (https; http only on loopback), e.g. `https://accounts.google.com`; empty = access-key sign-in only. Discovered on first use.'),
  OIDC_CLIENT_ID: Str('', 'This server\'s client id at the OIDC issuer; required with `OIDC_ISSUER`. Redirect URI to register there: `<PUBLIC_BASE_URL>/oauth/upstream/callback`.'),
  OIDC_CLIENT_SECRET: Str('', 'Client secret at the upstream OIDC issuer; empty = public client (PKCE only).'),
  OIDC_ALLOWED_EMAILS: Str('', 'Who may sign in through OIDC: comma-separated emails and `@domain`s (a bare `example.com` counts as `@example.com`), or `*` for every account of the issuer; required with `OIDC_ISSUER`. Unverified emails are refused.'),
  CLOSE_GRACE_MS: Int(10000, 'Milliseconds a SIGTERM/SIGINT shutdown may take before the process exits anyway (code 1). Running tool calls get all but 4 s of it to finish, then are stopped and answered with a "server is shutting down, retry" error; sandboxes keep running.', 100)
})
export type RawConfig = Static<typeof ConfigSchema>

export type SingleUserMode = 'lenient' | 'true' | 'false'
export type SubagentCli = 'claude' | 'codex' | 'opencode'

/** The validated configuration with derived values filled in. Read once, in core/server.ts. */
export interface AppConfig extends RawConfig {
  /** MCP_API_KEY is set: /mcp and every chat route need credentials (config-derive.ts protectedMode). */
  protectedMode: boolean
  singleUserMode: SingleUserMode
  subagentCli: SubagentCli
  publicBaseUrl: string
  /** false while PUBLIC_BASE_URL is unset or empty (the built-in default applies) */
  publicBaseUrlSet: boolean
  allowedOrigins: string[]
  dataDirHost: string
  sandboxNetwork: string
  skillsCacheDir: string
  /** SKILLS_CACHE_HOST_PATH, else the cache dir as the daemon sees it (below DATA_DIR_HOST when the cache is below DATA_DIR). */
  skillsCacheHostDir: string
  logLevel: string
  /** Listen address: HOST, else 0.0.0.0 in protected mode and 127.0.0.1 in open mode. */
  host: string
  /** True when HOST was empty and open mode chose loopback (the boot log says so). */
  hostDefaultedToLoopback: boolean
  trustProxy: TrustProxy
  /** OIDC_ALLOWED_EMAILS as lowercase entries: `user@example.com`, `@example.com` or `*`. */
  oidcAllowedEmails: string[]
  /** MCP_TOKENS_URL_ALLOW as serialised origins. */
  mcpTokensUrlAllow: string[]
  /** SANDBOX_POOL_SIZE as a number (auto resolved for this machine). */
  sandboxPoolSize: number
}

const BOOL: Record<string, boolean> = { true: true, 1: true, yes: true, false: false, 0: false, no: false }
const SIZE_UNITS: Record<string, number> = { '': 1, b: 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3 }

function convert (name: string, schema: TSchema & Record<string, unknown>, raw: string): unknown {
  const value = raw.trim()
  if (schema['x-kind'] === 'size') {
    const m = /^(\d+)\s*([kmg]?)(i?b)?$/i.exec(value)
    if (m === null) throw new CORE_INVALID_CONFIG(name, `'${raw}' is not a size (bytes, or a number with k, m or g)`)
    return Number(m[1]) * (SIZE_UNITS[(m[2] ?? '').toLowerCase()] ?? 1)
  }
  switch (schema.type) {
    case 'boolean': {
      const b = BOOL[value.toLowerCase()]
      if (b === undefined) throw new CORE_INVALID_CONFIG(name, `'${raw}' is not a boolean (true, false, 1, 0, yes, no)`)
      return b
    }
    case 'integer':
    case 'number': {
      if (!/^-?\d+(\.\d+)?$/.test(value)) throw new CORE_INVALID_CONFIG(name, `'${raw}' is not a number`)
      return Number(value)
    }
    default:
      return schema.anyOf !== undefined ? value.toLowerCase() : value
  }
}

/** Parses the environment into an AppConfig. Throws CORE_INVALID_CONFIG naming the first bad variable. */
export function loadConfig (env: Record<string, string | undefined>): AppConfig {
  const props = ConfigSchema.properties as unknown as Record<string, TSchema & Record<string, unknown>>
  const data: Record<string, unknown> = {}
  for (const [name, schema] of Object.entries(props)) {
    const raw = env[name]
    // An empty numeric or boolean value counts as unset; an empty string setting is a real value.
    if (raw === undefined || (raw.trim() === '' && schema.type !== 'string')) continue
    data[name] = convert(name, schema, raw)
  }
  const value = Value.Default(ConfigSchema, data) as RawConfig
  const [first] = Value.Errors(ConfigSchema, value)
  if (first !== undefined) {
    const name = first.instancePath.split('/')[1] ?? '?'
    throw new CORE_INVALID_CONFIG(name, `${String(env[name] ?? '')} ${first.message}`)
  }
  return { ...derive(value), publicBaseUrlSet: (env.PUBLIC_BASE_URL ?? '').trim() !== '' }
}

function derive (raw: RawConfig): Omit<AppConfig, 'publicBaseUrlSet'> {
  checkKey('MCP_API_KEY', raw.MCP_API_KEY)
  checkKey('LINK_SIGNING_KEY', raw.LINK_SIGNING_KEY)
  const mode = raw.SINGLE_USER_MODE.trim().toLowerCase()
  if (mode !== '' && mode !== 'true' && mode !== 'false') {
    throw new CORE_INVALID_CONFIG('SINGLE_USER_MODE', `'${raw.SINGLE_USER_MODE}' is not one of: (empty), true, false`)
  }
  const cli = raw.SUBAGENT_CLI.trim().toLowerCase() || 'claude'
  if (cli !== 'claude' && cli !== 'codex' && cli !== 'opencode') {
    throw new CORE_INVALID_CONFIG('SUBAGENT_CLI', `SUBAGENT_CLI='${raw.SUBAGENT_CLI}' is not one of: claude, codex, opencode`)
  }
  const allowedOrigins = raw.ALLOWED_ORIGINS.split(',').map(s => s.trim().replace(/\/+$/, '')).filter(Boolean)
  for (const origin of allowedOrigins) {
    if (!/^https?:\/\/[^/\s]+$/.test(origin)) throw new CORE_INVALID_CONFIG('ALLOWED_ORIGINS', `'${origin}' is not an origin (scheme://host[:port])`)
  }
  const publicBaseUrl = derivePublicBaseUrl(raw)
  return {
    ...raw,
    ...deriveNetwork(raw),
    protectedMode: protectedMode(raw.MCP_API_KEY),
    singleUserMode: mode === '' ? 'lenient' : mode as SingleUserMode,
    subagentCli: cli,
    publicBaseUrl,
    oidcAllowedEmails: deriveOAuth(raw, publicBaseUrl),
    allowedOrigins,
    mcpTokensUrlAllow: settingsOrigins(raw),
    dataDirHost: raw.DATA_DIR_HOST.trim() || raw.DATA_DIR,
    sandboxNetwork: raw.SANDBOX_NETWORK.trim() || `${raw.SANDBOX_PREFIX}-sandboxes`,
    skillsCacheDir: raw.SKILLS_CACHE_DIR.trim() || `${raw.DATA_DIR}/skills-cache`,
    skillsCacheHostDir: skillsCacheHost(raw),
    sandboxPoolSize: derivePoolSize(raw.SANDBOX_POOL_SIZE),
    logLevel: raw.DEBUG_LOGGING && raw.LOG_LEVEL === 'info' ? 'debug' : raw.LOG_LEVEL
  }
}

/** Applies defaults, then validates a plugin's options. An optional option always has a default, hence Required<>. */
export function parseOptions<T extends TSchema> (schema: T, raw: unknown, plugin: string): Required<Static<T>> {
  const value = Value.Default(schema, { ...(raw as object) })
  const [first] = Value.Errors(schema, value)
  if (first !== undefined) throw new CORE_INVALID_PLUGIN_OPTIONS(plugin, `${first.instancePath || '/'} ${first.message}`)
  return value as Required<Static<T>>
}
