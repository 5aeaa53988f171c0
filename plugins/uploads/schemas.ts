import Type, { type Static } from 'typebox'

export const UploadsOptions = Type.Object({
  maxBytes: Type.Optional(Type.Integer({ default: 104857600, minimum: 1, description: 'UPLOAD_MAX_BYTES' })),
  maxFiles: Type.Optional(Type.Integer({ default: 10000, minimum: 1, description: 'Most files listed, hashed or offered as resources per chat' })),
  manifestCacheChats: Type.Optional(Type.Integer({ default: 1000, minimum: 1, description: 'Chats whose MD5s are kept in memory' }))
})
export type UploadsOptions = Static<typeof UploadsOptions>

/** POST /api/uploads/{chat}/{path}: multipart/form-data; the first part named `file` is stored, others are skipped. */
export const UploadBody = Type.Object({
  file: Type.String({ format: 'binary', description: 'the file content (up to UPLOAD_MAX_BYTES, else 413)' })
})

export const UploadReply = Type.Object({
  status: Type.Literal('success'),
  filename: Type.String(),
  size: Type.Integer(),
  md5: Type.String()
})

export const UploadListReply = Type.Object({
  files: Type.Array(Type.Object({
    name: Type.String(),
    path: Type.String(),
    size: Type.Integer(),
    modified: Type.Number(),
    container_path: Type.String()
  })),
  total: Type.Integer()
})

export const ManifestReply = Type.Record(Type.String(), Type.String())
