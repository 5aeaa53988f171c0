import type { SwaggerOptions } from '@fastify/swagger'
import Type from 'typebox'
import { SERVER_NAME, SERVER_VERSION } from './version.js'

/**
 * The OpenAPI description (served by the docs plugin at /openapi.json) is generated from the route
 * schemas every plugin declares; this is its frame. Routes without a schema still appear, by path.
 */
export function openapiOptions (publicBaseUrl: string): SwaggerOptions {
  return {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Cubicle',
        version: SERVER_VERSION,
        description: `${SERVER_NAME}: a sandbox computer for every chat. MCP (Streamable HTTP, stateless) is at POST /mcp; ` +
          'the routes here are its side channel (files, uploads, preview, prompt) and operations. Chat routes accept ' +
          'the API key or a per-chat capability token (Authorization: Bearer, or ?t=).'
      },
      servers: [{ url: publicBaseUrl }],
      components: {
        securitySchemes: {
          bearer: { type: 'http', scheme: 'bearer', description: 'MCP_API_KEY, or a capability token on chat routes' },
          token: { type: 'apiKey', in: 'query', name: 't', description: 'capability token (files or control scope) on chat routes' }
        }
      },
      tags: [
        { name: 'mcp', description: 'Model Context Protocol' },
        { name: 'files', description: 'published outputs, archive and listing' },
        { name: 'uploads', description: 'the user\'s uploaded files' },
        { name: 'prompt', description: 'the system prompt and skills for clients outside MCP' },
        { name: 'operations', description: 'health, readiness, metrics, API description' },
        { name: 'egress', description: 'the per-chat egress policy of the sandbox proxy and its connection log' },
        { name: 'browser', description: 'the live browser of the sandbox over CDP' },
        { name: 'terminal', description: 'the web terminal: tmux session main in the sandbox' },
        { name: 'oauth', description: 'the OAuth 2.1 authorization server for /mcp (with OAUTH_ENABLED)' }
      ]
    },
    // Preflight answers are not API surface.
    transform: ({ schema, url, route }) => ({ schema: route.method === 'OPTIONS' ? { ...schema, hide: true } : schema, url })
  }
}

const Status = (value: string) => Type.Object({ status: Type.Literal(value) })

export const HEALTH_SCHEMA = {
  summary: 'Liveness: the process serves requests (no Docker call)',
  tags: ['operations'],
  response: { 200: Status('healthy') }
}

export const READY_SCHEMA = {
  summary: 'Readiness: Docker answers, the sandbox image is present, the data directory is writable',
  tags: ['operations'],
  response: {
    200: Type.Object({ status: Type.Literal('ready') }, { additionalProperties: Type.String() }),
    503: Type.Object({ status: Type.Literal('not_ready') }, { additionalProperties: Type.String() })
  }
}
