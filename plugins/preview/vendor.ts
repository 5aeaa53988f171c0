import { existsSync } from 'node:fs'
import { createRequire } from 'node:module'
import { join } from 'node:path'

/**
 * Front-end libraries the preview page loads, each served from its npm package (no CDN, works air-gapped).
 * `alias` becomes `/static/vendor/<alias>/`; only the listed files of a package are reachable.
 * Every parser of agent-written documents (marked, highlight.js, papaparse, read-excel-file, mammoth) runs only
 * inside the page's parser worker (public/parser-worker.js), never in the page; DOMPurify runs in the page.
 */
export interface VendorPackage { alias: string, pkg: string, files: string[] }

export const VENDOR: VendorPackage[] = [
  { alias: 'marked', pkg: 'marked', files: ['lib/marked.umd.js'] },
  { alias: 'dompurify', pkg: 'dompurify', files: ['dist/purify.min.js'] },
  { alias: 'highlight', pkg: '@highlightjs/cdn-assets', files: ['highlight.min.js', 'styles/github.min.css', 'styles/github-dark.min.css'] },
  { alias: 'papaparse', pkg: 'papaparse', files: ['papaparse.min.js'] },
  { alias: 'read-excel-file', pkg: 'read-excel-file', files: ['bundle/read-excel-file.min.js'] },
  { alias: 'mammoth', pkg: 'mammoth', files: ['mammoth.browser.min.js'] },
  { alias: 'xterm', pkg: '@xterm/xterm', files: ['lib/xterm.mjs', 'css/xterm.css'] },
  { alias: 'xterm-fit', pkg: '@xterm/addon-fit', files: ['lib/addon-fit.mjs'] }
]

/** The installed package's directory, found along Node's module search paths (export maps do not matter). */
export function packageDir (pkg: string, from: string): string {
  const require = createRequire(from)
  for (const base of require.resolve.paths(pkg) ?? []) {
    const dir = join(base, pkg)
    if (existsSync(join(dir, 'package.json'))) return dir
  }
  throw new Error(`preview: npm package '${pkg}' is not installed`)
}
