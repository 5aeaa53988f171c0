import Type, { type Static } from 'typebox'

export const MetricsOptions = Type.Object({
  path: Type.Optional(Type.String({ default: '/metrics', description: 'where the Prometheus text is served' })),
  prefix: Type.Optional(Type.String({ default: 'cubicle_', pattern: '^[a-zA-Z_][a-zA-Z0-9_]*$', description: 'prefix of every metric name' })),
  defaultMetrics: Type.Optional(Type.Boolean({ default: true, description: 'also export prom-client\'s process and Node.js runtime metrics' })),
  maxRunning: Type.Optional(Type.Integer({ default: 0, minimum: 0, description: 'MAX_RUNNING_SANDBOXES, exported as the sandbox capacity (0 = unlimited)' }))
})
export type MetricsOptions = Static<typeof MetricsOptions>
