import { chatKey, normalizeChatId } from '../../core/chat-id.js'

/*
 * Every Docker name derives from the chat key K = sha256(chat id)[0:32] (docs/contract.md#derived-names); the raw chat
 * id appears only in labels and in the sandbox's CHAT_ID.
 */
export const MANAGED_BY = 'computer-use-server'
export const TOOL_LABEL = 'computer-use-mcp'

export interface SandboxNames {
  chatId: string
  key: string
  /** `{prefix}-sbx-{K}` */
  container: string
  /** `{prefix}-home-{K}` */
  volume: string
  /** `sbx-{K[0:12]}` */
  hostname: string
}

export function sandboxNames (prefix: string, chatId: string): SandboxNames {
  const key = chatKey(chatId)
  return { chatId, key, container: `${prefix}-sbx-${key}`, volume: `${prefix}-home-${key}`, hostname: `sbx-${key.slice(0, 12)}` }
}

/** The five labels the workspace volume carries (and the container, plus created-at and image). */
export function volumeLabels (prefix: string, chatId: string): Record<string, string> {
  return {
    'managed-by': MANAGED_BY,
    tool: TOOL_LABEL,
    'cu.prefix': prefix,
    'cu.chat-id': chatId,
    'cu.chat-key': chatKey(chatId)
  }
}

/** Container labels of docs/contract.md#sandbox-configuration; `createdAt` is RFC 3339 (UTC, second precision). */
export function containerLabels (prefix: string, chatId: string, image: string, createdAt: Date): Record<string, string> {
  return { ...volumeLabels(prefix, chatId), 'cu.created-at': rfc3339(createdAt), 'cu.image': image }
}

/** The prefix lease's lock object carries the owner labels (uninstall finds it) and this role; it is not a sandbox. */
export const LEASE_ROLE = { label: 'cu.role', value: 'lease' } as const

/** Label filter selecting everything this server instance owns. */
export function ownerFilter (prefix: string): string[] {
  return [`managed-by=${MANAGED_BY}`, `cu.prefix=${prefix}`]
}

export function rfc3339 (d: Date): string {
  return d.toISOString().replace(/\.\d{3}Z$/, 'Z')
}

/**
 * Reads a labelled object back: the chat id and key when the labels are ours and consistent
 * (cu.chat-key == hash(cu.chat-id)), else the reason it is not adoptable.
 */
export function readLabels (prefix: string, labels: Record<string, string> | undefined):
  { ok: true, chatId: string, key: string, createdAt?: string } | { ok: false, reason: string } {
  if (labels === undefined) return { ok: false, reason: 'no labels' }
  if (labels['managed-by'] !== MANAGED_BY || labels['cu.prefix'] !== prefix) return { ok: false, reason: 'not ours' }
  const chatId = labels['cu.chat-id']
  const key = labels['cu.chat-key']
  if (chatId === undefined || key === undefined) return { ok: false, reason: 'missing cu.chat-id or cu.chat-key' }
  if (normalizeChatId(chatId) !== chatId) return { ok: false, reason: 'cu.chat-id is not a valid chat id' }
  if (chatKey(chatId) !== key) return { ok: false, reason: 'cu.chat-key does not match the hash of cu.chat-id' }
  return { ok: true, chatId, key, createdAt: labels['cu.created-at'] }
}
