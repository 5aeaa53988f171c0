import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client'

/** Every metric this server exports, in one per-app registry (never prom-client's global one). */
export interface Collectors {
  registry: Registry
  requests: Counter<'method' | 'route' | 'status'>
  requestSeconds: Histogram<'method' | 'route'>
  inFlight: Gauge
  bytesServed: Counter<'route'>
  authFailures: Counter<'route' | 'status'>
  toolCalls: Counter<'tool' | 'outcome'>
  toolSeconds: Histogram<'tool'>
  withoutChatId: Counter<'method' | 'mode'>
  sandboxes: Gauge<'state'>
  /** Set by the sandbox observer: the counts by state, read at scrape time. */
  census: { read?: () => Record<string, number>, pooled?: () => number }
  /** Sandboxes waiting in the warm pool (SANDBOX_POOL_SIZE), read at scrape time; not chats. */
  sandboxPool: Gauge
  sandboxStarts: Counter
  sandboxStops: Counter<'reason'>
  sandboxCapacity: Gauge
}

/**
 * Builds the collectors. Labels are bounded sets chosen by the server (route patterns, registered tool
 * names, outcomes, states): never a raw URL, chat id, token or anything a client can vary freely.
 */
export function createCollectors (prefix: string, defaults: boolean): Collectors {
  const registry = new Registry()
  if (defaults) collectDefaultMetrics({ register: registry, prefix })
  const registers = [registry]
  const census: Collectors['census'] = {}
  return {
    census,
    registry,
    requests: new Counter({ name: `${prefix}http_requests_total`, help: 'HTTP requests answered, by method, route pattern and status code', labelNames: ['method', 'route', 'status'], registers }),
    requestSeconds: new Histogram({
      name: `${prefix}http_request_duration_seconds`,
      help: 'Time from request start to the last byte of the answer, by method and route pattern (SSE tool calls last as long as the call)',
      labelNames: ['method', 'route'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 120, 600],
      registers
    }),
    inFlight: new Gauge({ name: `${prefix}http_requests_in_flight`, help: 'HTTP requests being answered now (WebSockets not included)', registers }),
    bytesServed: new Counter({ name: `${prefix}http_response_bytes_total`, help: 'Bytes written to clients (headers and body), by route pattern', labelNames: ['route'], registers }),
    authFailures: new Counter({ name: `${prefix}auth_failures_total`, help: 'Requests refused for credentials: 401 (missing/invalid), 403 (wrong scope or origin), 429 (failed-auth throttle)', labelNames: ['route', 'status'], registers }),
    toolCalls: new Counter({ name: `${prefix}tool_calls_total`, help: 'MCP tools/call by tool and outcome (ok, error, rejected, cancelled, shutdown)', labelNames: ['tool', 'outcome'], registers }),
    toolSeconds: new Histogram({
      name: `${prefix}tool_call_duration_seconds`,
      help: 'Tool call latency by tool, sandbox start included (bash_tool: the exec latency of a command)',
      labelNames: ['tool'],
      buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900, 3600],
      registers
    }),
    withoutChatId: new Counter({
      name: `${prefix}requests_without_chat_id_total`,
      help: 'MCP requests that named no chat (no X-Chat-Id or X-OpenWebUI-Chat-Id, not an OAuth user), by MCP method and SINGLE_USER_MODE: ' +
        'lenient = it used the shared default sandbox that every such chat shares (Open WebUI: set ENABLE_FORWARD_USER_INFO_HEADERS=true there), ' +
        'strict = a tool call was refused',
      labelNames: ['method', 'mode'],
      registers
    }),
    sandboxes: new Gauge({
      name: `${prefix}sandboxes`,
      help: 'Sandboxes this process has seen, by state (running, paused, stopped, removed)',
      labelNames: ['state'],
      registers,
      collect () {
        for (const [state, n] of Object.entries(census.read?.() ?? {})) this.set({ state }, n)
      }
    }),
    sandboxStarts: new Counter({ name: `${prefix}sandbox_starts_total`, help: 'Sandboxes created or started by a tool call', registers }),
    sandboxStops: new Counter({ name: `${prefix}sandbox_stops_total`, help: 'Sandboxes stopped or removed, by reason (idle, max-age, capacity, …), and idle sandboxes paused (reason paused)', labelNames: ['reason'], registers }),
    sandboxPool: new Gauge({
      name: `${prefix}sandbox_pool`,
      help: 'Started, ready sandboxes waiting in the warm pool for a new chat (SANDBOX_POOL_SIZE); not counted in sandboxes{state}',
      registers,
      collect () { this.set(census.pooled?.() ?? 0) }
    }),
    sandboxCapacity: new Gauge({ name: `${prefix}sandbox_capacity`, help: 'MAX_RUNNING_SANDBOXES: running and paused sandboxes allowed at once (0 = unlimited)', registers })
  }
}
