import Type, { type Static } from 'typebox'

export const ChatStorageOptions = Type.Object({
  dataDir: Type.String({ minLength: 1, description: 'DATA_DIR: the server-side root of chat data and server state' })
})
export type ChatStorageOptions = Static<typeof ChatStorageOptions>
