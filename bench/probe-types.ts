/* The messages of bench/server-probe.mjs (plain JavaScript, so that it preloads into the built server without a TypeScript loader). */
export interface TraceEvent {
  kind: 'client' | 'server'
  method: string
  path: string
  start: number
  /** response headers (client) or response finished (server) */
  end?: number
  status?: number
  /** hijacked streams: the upgrade, the first bytes received, the end of the stream */
  upgrade?: number
  firstData?: number
  streamEnd?: number
  /** the JSON body's Cmd of an exec create (first 3 words) */
  cmd?: string
  chat?: string
}

export type ProbeRequest = { op: 'memory' } | { op: 'heap', file: string } | { op: 'cpu-start' } | { op: 'cpu-stop', file: string } | { op: 'trace-start' } | { op: 'trace-stop' }
