import type { FastifySchemaCompiler } from 'fastify'
import Type from 'typebox'

/**
 * Route schema pieces shared by the chat routes, and the marker for inputs a handler checks itself.
 * Every route declares its params, query and body (the OpenAPI description at
 * /openapi.json is generated from them; test/core/openapi-routes.test.ts holds every route to it).
 */

const alwaysValid = (): true => true

/**
 * Route option for routes whose inputs are checked by hand, in a fixed order with coded errors
 * (chat id 400 invalid_chat_id → credentials 401/403 → the input's own code, e.g. bad_pid): the schema
 * documents the inputs, AJV neither rejects first (with its own message) nor coerces or strips them.
 * Use it only where a handler or hook really checks every input the schema describes.
 */
export const HAND_CHECKED: { validatorCompiler: FastifySchemaCompiler<unknown> } = { validatorCompiler: () => alwaysValid }

const chat = Type.String({ description: 'the chat id (docs/contract.md#chat-id-validation: 1–64 of a-z 0-9 _ : -, case-insensitive); 400 invalid_chat_id otherwise' })

/** `/…/:chat` */
export const ChatParams = Type.Object({ chat })

/** `/…/:chat/*`: the rest of the path, percent-encoded segments of a relative file path. */
export const ChatPathParams = Type.Object({
  chat,
  '*': Type.String({ description: 'relative path inside the chat\'s directory (no `..`, no empty or dot segments)' })
})

/** `?t=`: a capability token of the chat (the alternative to `Authorization: Bearer`, docs/contract.md#capability-tokens). */
export const TokenQuery = {
  t: Type.Optional(Type.String({ description: 'capability token of this chat (files or control scope), instead of Authorization: Bearer' }))
}

/** Chat routes that take only the token in their query. */
export const ChatQuery = Type.Object(TokenQuery)

/** POST routes that take no body: whatever is sent (up to the route's limit) is ignored. */
export const NoBody = Type.Unknown({ description: 'no body needed; anything sent is ignored' })

/** A 200 answer that is not JSON (an HTML page, a file, plain text). */
export function mediaReply (description: string, mediaTypes: string[]): { description: string, content: Record<string, { schema: unknown }> } {
  const schema = Type.String()
  return { description, content: Object.fromEntries(mediaTypes.map(type => [type, { schema }])) }
}
