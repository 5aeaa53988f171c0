/*
 * An integrator's plugin: adds one MCP tool and one HTTP route, with no change to core or
 * mcp-transport. Load it by adding one line to fastify.config.ts:
 *   entry(helloPlugin, { greeting: 'Hello' })
 */
import fp from 'fastify-plugin'
import type { FastifyPluginAsync } from 'fastify'
import Type, { type Static } from 'typebox'
import { parseOptions } from '../../core/config.js'
import type {} from '../../plugins/mcp-transport/types.js'

export const HelloOptions = Type.Object({
  greeting: Type.Optional(Type.String({ default: 'Hello', maxLength: 40 }))
})
export type HelloOptions = Static<typeof HelloOptions>

const HelloArgs = Type.Object({
  name: Type.String({ description: 'Who to greet', minLength: 1, maxLength: 100 }),
  times: Type.Optional(Type.Integer({ description: 'How many greetings', minimum: 1, maximum: 5, default: 1 }))
})

const helloPlugin: FastifyPluginAsync<HelloOptions> = async (fastify, raw) => {
  const { greeting } = parseOptions(HelloOptions, raw, 'hello-plugin')
  fastify.mcp.addTool({
    name: 'hello_world',
    description: 'Greets someone (an example of a tool contributed by an integrator plugin).',
    inputSchema: HelloArgs,
    handler: async (args, ctx) => ({
      content: [{ type: 'text', text: Array(args.times ?? 1).fill(`${greeting}, ${args.name}! (chat ${ctx.chatId})`).join('\n') }]
    })
  })
  // A schema with a summary and a tag: /openapi.json and docs/routes.md describe the route from it.
  fastify.get('/hello', { schema: { summary: 'The configured greeting', tags: ['hello'] } }, async () => ({ greeting }))
}

export default fp(helloPlugin, { name: 'hello-plugin', fastify: '5.x', dependencies: ['mcp-transport'], decorators: { fastify: ['mcp'] } })
