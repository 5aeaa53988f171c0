import { createRequire } from 'node:module'
import { join } from 'node:path'
import type { Plugin } from 'esbuild'
import { assetDir } from '../../core/asset-dir.js'
import { appShell, appStyles, pageHead } from './page.js'
import type { AppViewName } from './types.js'
import { VENDOR, packageDir } from './vendor.js'

export interface ViewBuilder {
  /** The self-contained HTML of a view (built on first use, then cached; a failed build is retried on the next read). */
  html (view: AppViewName): Promise<string>
}

/**
 * Resolves the preview app's own imports for esbuild: `cubicle-preview/…` (the entry's import of the app)
 * to the front-end directory, and `../vendor/<alias>/<file>` (how the app imports xterm, served under
 * /static/vendor) to the npm file vendor.ts lists, so the bundle has exactly the code the page loads.
 */
function previewResolver (publicDir: string, from: string): Plugin {
  return {
    name: 'cubicle-preview',
    setup (b) {
      b.onResolve({ filter: /^cubicle-preview\// }, args => ({ path: join(publicDir, args.path.slice('cubicle-preview/'.length)) }))
      b.onResolve({ filter: /^\.\.\/vendor\// }, args => {
        const [alias, ...rest] = args.path.slice('../vendor/'.length).split('/')
        const file = rest.join('/')
        const pkg = VENDOR.find(v => v.alias === alias && v.files.includes(file))
        if (pkg === undefined) return { errors: [{ text: `not a vendored file: ${args.path}` }] }
        return { path: join(packageDir(pkg.pkg, from), file) }
      })
    }
  }
}

/**
 * The preview app as one self-contained page for a chat host's frame (MCP Apps, plugins/mcp-apps).
 * Builds it from the preview app's modules (plugins/preview/public) and the ext-apps App, with
 * esbuild, once per server: `root` (PUBLIC_BASE_URL with a trailing slash) is the only server-specific
 * value in them (where stylesheets, the vendored parsers and the parser worker are loaded from), never a
 * chat id or a token.
 */
export function createViewBuilder (opts: { root: string, publicDir: string }): ViewBuilder {
  const entry = join(assetDir(import.meta.url, 'preview', 'app-view'), 'entry.js')
  const from = createRequire(import.meta.url).resolve('@modelcontextprotocol/ext-apps/app-with-deps')
  let script: Promise<string> | undefined
  const pages = new Map<AppViewName, string>()

  async function bundle (): Promise<string> {
    // Loaded at the first build: a server whose clients never open an MCP Apps view never loads esbuild.
    const { build } = await import('esbuild')
    const result = await build({
      entryPoints: [entry],
      bundle: true,
      format: 'esm',
      platform: 'browser',
      target: 'es2022',
      minify: true,
      write: false,
      legalComments: 'none',
      logLevel: 'silent',
      // Every preview module that resolves a URL from its own lies in public/ (browser-view, parse, sanitize).
      define: { 'import.meta.url': JSON.stringify(`${opts.root}static/preview/app.js`) },
      plugins: [previewResolver(opts.publicDir, from)]
    })
    const text = result.outputFiles[0]?.text
    if (text === undefined) throw new Error('preview: the app view bundle is empty')
    // Inline in <script>: no `</script` may end it early (in JS `<\/` equals `</` in strings and regexps).
    return text.replace(/<\/(script)/gi, '<\\/$1')
  }

  return {
    async html (view) {
      const cached = pages.get(view)
      if (cached !== undefined) return cached
      script ??= bundle()
      let code: string
      try { code = await script } catch (err) { script = undefined; throw err }
      const page = `<!doctype html>
<html lang="en" data-view="${view}">
${pageHead('Cubicle', [...appStyles(opts.root), '<style>html,body{margin:0}html[data-state="waiting"] body{display:none}#app{height:560px;min-height:0}</style>'], opts.root)}
<body>
<script type="application/json" id="config">{}</script>
${appShell({ egress: null, apps: null })}
<script type="module">${code}</script>
</body>
</html>
`
      pages.set(view, page)
      return page
    }
  }
}
