import { join } from 'node:path'
import { chatKey } from './chat-id.js'

/** Where a chat's data lives (docs/contract.md#derived-names). Only the hash-derived key appears in paths. */
export interface ChatPaths {
  key: string
  /** `{root}/chats/{K}` */
  dir: string
  uploads: string
  outputs: string
  meta: string
}

/** `root` is DATA_DIR for the server's own file access, or DATA_DIR_HOST for bind mounts. */
export function chatPaths (root: string, chatId: string): ChatPaths {
  const key = chatKey(chatId)
  const dir = join(root, 'chats', key)
  return { key, dir, uploads: join(dir, 'uploads'), outputs: join(dir, 'outputs'), meta: join(dir, 'meta.json') }
}

/** Paths inside every sandbox (docs/contract.md#sandbox-layout). */
export const SANDBOX_HOME = '/home/assistant'
export const SANDBOX_UPLOADS = '/mnt/user-data/uploads'
export const SANDBOX_OUTPUTS = '/mnt/user-data/outputs'
export const SANDBOX_SKILLS = '/mnt/skills'
