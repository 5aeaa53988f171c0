import { chatKey, normalizeChatId } from '../../core/chat-id.js'
import { labelTime, labelValue, timeOfLabel } from '../../core/label-value.js'

export { labelTime, labelValue, rfc3339 } from '../../core/label-value.js'

/*
 * Every Docker name derives from the chat key K = sha256(chat id)[0:32] (docs/contract.md#derived-names); the raw chat
 * id appears only in the server's records and in the sandbox's CHAT_ID. Every label key and value is a valid
 * Kubernetes label (core/label-value.ts): values of at most 63 characters of [-A-Za-z0-9_.], alphanumeric at
 * both ends; times in labelTime's basic form.
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
  /** the same for every sandbox (SANDBOX_HOSTNAME): a warm-pool sandbox needs no change when a chat claims it */
  hostname: string
}

/** The hostname of every sandbox: a claimed pool sandbox and a created one cannot differ in it. */
export const SANDBOX_HOSTNAME = 'sandbox'

export function sandboxNames (prefix: string, chatId: string): SandboxNames {
  const key = chatKey(chatId)
  return { chatId, key, container: `${prefix}-sbx-${key}`, volume: `${prefix}-home-${key}`, hostname: SANDBOX_HOSTNAME }
}

/** The labels every object of this server instance carries (ownerFilter selects them). */
export function ownerLabels (prefix: string): Record<string, string> {
  return { 'managed-by': MANAGED_BY, tool: TOOL_LABEL, 'cu.prefix': prefix }
}

/**
 * The chat's identity as labels (`cu.chat-key`: the key, never the raw id), or none: only on an engine
 * that can also set them when a chat claims a pool sandbox (SandboxEngine.labelsAtClaim), so that a
 * created and a claimed sandbox look the same. Without them the name and the chat's record identify it.
 */
export function chatLabels (labelsAtClaim: boolean, chatId: string): Record<string, string> {
  return labelsAtClaim ? { 'cu.chat-key': chatKey(chatId) } : {}
}

/** The labels of a chat's workspace volume. */
export function volumeLabels (prefix: string, chatId: string, labelsAtClaim = false): Record<string, string> {
  return { ...ownerLabels(prefix), ...chatLabels(labelsAtClaim, chatId) }
}

/** Container labels: the volume's plus when and from which image it was created. */
export function containerLabels (prefix: string, chatId: string, image: string, createdAt: Date, labelsAtClaim = false): Record<string, string> {
  return { ...volumeLabels(prefix, chatId, labelsAtClaim), ...creationLabels(image, createdAt) }
}

/** `cu.created-at` (labelTime) and `cu.image` (the image reference as a label value). */
export function creationLabels (image: string, createdAt: Date): Record<string, string> {
  return { 'cu.created-at': labelTime(createdAt), 'cu.image': labelValue(image) }
}

/**
 * The creation time of a labelled sandbox as RFC 3339 (`cu.created-at` in labelTime's form, or the
 * extended form that earlier versions wrote), undefined without a readable one.
 */
export function createdAtOf (labels: Record<string, string>): string | undefined {
  const v = labels['cu.created-at']
  return v === undefined ? undefined : timeOfLabel(v)
}

/** The prefix lease's lock object carries the owner labels (uninstall finds it) and this role; it is not a sandbox. */
export const LEASE_ROLE = { label: 'cu.role', value: 'lease' } as const

/** The labels of the sandbox network (network.ts). */
export function networkLabels (prefix: string): Record<string, string> {
  return { 'managed-by': MANAGED_BY, 'cu.prefix': prefix }
}

/** The labels of the prefix lease's lock object (prefix-lease.ts): the owner's, and its role. */
export function leaseLabels (prefix: string): Record<string, string> {
  return { 'managed-by': MANAGED_BY, 'cu.prefix': prefix, [LEASE_ROLE.label]: LEASE_ROLE.value }
}

/** Label filter selecting everything this server instance owns. */
export function ownerFilter (prefix: string): string[] {
  return [`managed-by=${MANAGED_BY}`, `cu.prefix=${prefix}`]
}

/**
 * Reads the labels of an object written by an earlier version (which labelled it with the raw chat id):
 * the chat id and key when the labels are ours and consistent (cu.chat-key == hash(cu.chat-id)), else
 * the reason it is not adoptable.
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
  return { ok: true, chatId, key, createdAt: createdAtOf(labels) }
}
