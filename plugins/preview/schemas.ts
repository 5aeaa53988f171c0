import Type, { type Static } from 'typebox'

export const PreviewOptions = Type.Object({
  frameAncestors: Type.Optional(Type.String({ default: '*', description: 'FRAME_ANCESTORS: who may embed the preview page' })),
  publicDir: Type.Optional(Type.String({ default: '', description: 'front-end files; empty = plugins/preview/public of this install' })),
  parseTimeoutMs: Type.Optional(Type.Integer({ default: 20000, minimum: 100, maximum: 600000, description: 'how long the page lets its parser worker read one document before it terminates it' }))
})
export type PreviewOptions = Static<typeof PreviewOptions>

/** The config the page reads from its `<script type="application/json" id="config">` block (docs/contract.md#preview-page). */
export interface PreviewConfig {
  chatId: string
  apiUrl: string
  filesBase: string
  scope: 'files' | 'full'
  token: string | null
  /** Extension of docs/contract.md#preview-page: the parser worker's time budget per document (a runaway parser is terminated). */
  parseTimeoutMs: number
  /**
   * Extension (docs/contract.md#egress): the egress routes of the chat, each with the files token (read-only), for the
   * Network view; null when the server has no egress proxy (the view is not offered).
   */
  egress: { policy: string, log: string } | null
  /**
   * Extension (docs/features.md#app-preview-urls): the chat's app listing with the page's control token, for
   * the Apps view; null without the ports plugin or without a control token (files-only pages).
   */
  apps: { list: string } | null
  /** The server's root URL (absolute, ends with `/`); the page's parent when absent. Set for the MCP Apps view. */
  base?: string
  /** The view shown first in full scope (`browser`, `terminal`); Outputs when absent. Set for the MCP Apps view. */
  view?: string
}
