import Type, { type Static } from 'typebox'

export const FilesOptions = Type.Object({
  dataDir: Type.String({ minLength: 1, description: 'DATA_DIR: server-side root of chat data' }),
  archiveMaxBytes: Type.Optional(Type.Integer({ default: 2147483648, minimum: 1, description: 'ARCHIVE_MAX_BYTES: uncompressed archive limit' })),
  archiveMaxFiles: Type.Optional(Type.Integer({ default: 10000, minimum: 1, description: 'files per archive' })),
  listingMaxEntries: Type.Optional(Type.Integer({ default: 5000, minimum: 1, description: 'entries in GET /api/outputs before truncated' })),
  listingScanLimit: Type.Optional(Type.Integer({ default: 100000, minimum: 1, description: 'files examined by one listing (bounds its cost)' })),
  frameAncestors: Type.Optional(Type.String({ default: '*', description: 'FRAME_ANCESTORS for the CSP of active content' }))
})
export type FilesOptions = Static<typeof FilesOptions>

/** One entry of GET /api/outputs/{chat} (surface.md §6.3). */
export const OutputEntry = Type.Object({
  name: Type.String(),
  path: Type.String({ description: 'relative to outputs, / separated' }),
  size: Type.Integer(),
  modified: Type.Number({ description: 'mtime, Unix seconds' }),
  type: Type.String({ description: 'class of §6.3 item 5' }),
  mime: Type.String(),
  url: Type.String({ description: 'relative URL with encoded segments (and the files token in protected mode)' })
})
export type OutputEntry = Static<typeof OutputEntry>

export const OutputsListing = Type.Object({
  chat_id: Type.String(),
  files: Type.Array(OutputEntry),
  total: Type.Integer(),
  timestamp: Type.Number(),
  truncated: Type.Optional(Type.Boolean())
})
export type OutputsListing = Static<typeof OutputsListing>
