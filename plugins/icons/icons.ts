import type { Icon } from '@modelcontextprotocol/sdk/types.js'

/** Width and height of every PNG in public/ (scripts/render-icons.ts renders them from the SVGs). */
export const PNG_SIZE = 128

/** Where the icons are served, below the public base URL. */
export const ICON_PREFIX = '/icons'

/** The server's own icon (serverInfo.icons); the tools' icons are named after the tool. */
export const SERVER_ICON = 'cubicle'

/** Icon names with a file pair in public/: the server and the built-in tools. */
export const ICON_NAMES: readonly string[] = [SERVER_ICON, 'bash_tool', 'view', 'create_file', 'str_replace', 'sub_agent']

/**
 * The MCP `icons` of one name (docs/contract.md#icons): a PNG, which every client that shows icons must
 * support, then the SVG, which scales. Absolute URLs on our own origin, so a client fetches them
 * from the server it already trusts, never from a third party.
 */
export function iconsOf (publicBaseUrl: string, name: string): Icon[] {
  const base = `${publicBaseUrl.replace(/\/+$/, '')}${ICON_PREFIX}/${name}`
  return [
    { src: `${base}.png`, mimeType: 'image/png', sizes: [`${PNG_SIZE}x${PNG_SIZE}`] },
    { src: `${base}.svg`, mimeType: 'image/svg+xml', sizes: ['any'] }
  ]
}

/** serverInfo.icons of the MCP transport (fastify.config.ts hands them over). */
export const serverIcons = (publicBaseUrl: string): Icon[] => iconsOf(publicBaseUrl, SERVER_ICON)
