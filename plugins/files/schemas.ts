import Type, { type Static } from 'typebox'
import { TokenQuery } from '../../core/route-schema.js'

export const FilesOptions = Type.Object({
  archiveMaxBytes: Type.Optional(Type.Integer({ default: 2147483648, minimum: 1, description: 'ARCHIVE_MAX_BYTES: uncompressed archive limit' })),
  archiveMaxFiles: Type.Optional(Type.Integer({ default: 10000, minimum: 1, description: 'files per archive' })),
  listingMaxEntries: Type.Optional(Type.Integer({ default: 5000, minimum: 1, description: 'entries in GET /api/outputs before truncated' })),
  listingScanLimit: Type.Optional(Type.Integer({ default: 100000, minimum: 1, description: 'files examined by one listing walk (bounds its cost); more → truncated' })),
  walkBudgetMs: Type.Optional(Type.Integer({ default: 10000, minimum: 1, description: 'a listing walk still running after this answers truncated; an archive plan → 413' })),
  listingCacheMs: Type.Optional(Type.Integer({ default: 2000, minimum: 0, description: 'a listing is reused this long (or twice its walk time); 0 = single flight only' })),
  listingCacheMaxBytes: Type.Optional(Type.Integer({ default: 33554432, minimum: 0, description: 'serialised listings cached across chats (least recently used out first)' })),
  listingMaxWalks: Type.Optional(Type.Integer({ default: 2, minimum: 1, description: 'listing walks running at once across all chats' })),
  listingWaitMs: Type.Optional(Type.Integer({ default: 10000, minimum: 0, description: 'how long a listing waits for a walk slot before 429 server_busy' })),
  archivesPerChat: Type.Optional(Type.Integer({ default: 1, minimum: 1, description: 'archives streaming at once for one chat; more wait, then 429 archive_in_progress' })),
  archivesMax: Type.Optional(Type.Integer({ default: 2, minimum: 1, description: 'archives streaming at once across all chats; more wait, then 429 server_busy' })),
  archiveWaitMs: Type.Optional(Type.Integer({ default: 5000, minimum: 0, description: 'how long an archive request waits for its slots' })),
  archiveStallMs: Type.Optional(Type.Integer({ default: 30000, minimum: 100, description: 'watchdog window of a streaming archive' })),
  archiveMinBytesPerSecond: Type.Optional(Type.Integer({ default: 65536, minimum: 0, description: 'a reader slower than this over a window (data waiting) is cut off' })),
  frameAncestors: Type.Optional(Type.String({ default: '*', description: 'FRAME_ANCESTORS for the CSP of active content' }))
})
export type FilesOptions = Static<typeof FilesOptions>

/** GET /files/{chat}/{path}: `1` or `true` switch a flag on; anything else (or absent) leaves it off. */
export const FileQuery = Type.Object({
  ...TokenQuery,
  download: Type.Optional(Type.String({ description: '1 or true: Content-Disposition attachment (download instead of display)' })),
  raw: Type.Optional(Type.String({ description: '1 or true: serve a file named `archive` itself instead of the zip of all outputs' }))
})

/** One entry of GET /api/outputs/{chat} (docs/contract.md#files-and-uploads). */
export const OutputEntry = Type.Object({
  name: Type.String(),
  path: Type.String({ description: 'relative to outputs, / separated' }),
  size: Type.Integer(),
  modified: Type.Number({ description: 'mtime, Unix seconds' }),
  type: Type.String({ description: 'class of docs/contract.md#files-and-uploads' }),
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
