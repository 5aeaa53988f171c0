import type { PreviewConfig } from './schemas.js'

export type { PreviewConfig }

/** The views the app can open on inside a chat host (MCP Apps); `files` is the Outputs view. */
export type AppViewName = 'browser' | 'terminal' | 'files'

/** What the preview offers other plugins (decorated as `fastify.previewPage`). */
export interface PreviewPage {
  /** The app's config for a chat, as the page gets it for a request with token `used` (none: full scope). */
  config (chatId: string, used: string | undefined): PreviewConfig
  /**
   * The app as one self-contained HTML page opening on `view` (built from the same modules on first
   * use, then cached): no chat id or token in it; the config arrives later (plugins/mcp-apps).
   */
  appView (view: AppViewName): Promise<string>
}

declare module 'fastify' {
  interface FastifyInstance { previewPage: PreviewPage }
}
