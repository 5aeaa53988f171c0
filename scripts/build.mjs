// `npm run build` (docs/architecture.md#the-build): TypeScript, then esbuild bundles what the server loads.
// Every module Node loads costs resident memory beyond its code, and the server loaded 1,819 at boot
// (docs/performance.md, (h)): our own 327, and packages that ship hundreds of small ones (typebox 683).
// Our modules become a few files in dist/core/ (dist/core/server.js is the entry, as before); the
// packages in VENDORED, which only our code imports, become dist/node_modules/<name>/: a few files per
// package, one copy of every internal module shared by its entry points (code splitting). Node resolves
// a bare `import 'typebox'` from dist/core/ to dist/node_modules/typebox before the project's
// node_modules, so no import needs rewriting; the checks below make sure every one of them lands in the
// bundle and that the bundle holds no second copy of a package something else loads. Every other package
// is loaded from node_modules as it is.
import { execFileSync } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { isBuiltin } from 'node:module'
import { tmpdir } from 'node:os'
import { dirname, join, sep } from 'node:path'
import { fileURLToPath } from 'node:url'
import { build } from 'esbuild'

const root = fileURLToPath(new URL('..', import.meta.url))
const dist = join(root, 'dist')
const vendorDir = join(dist, 'node_modules')

/**
 * Packages bundled into dist/node_modules, as the entries our modules import. A package belongs here only if
 * nothing in node_modules that the server loads imports it (that importer would load the original, a
 * second copy) and its code is ES modules.
 */
const VENDORED = ['typebox', '@modelcontextprotocol/server']
/**
 * Packages that only the vendored ones import, inlined into their bundle (same conditions); our modules
 * must not import them (it would load the original beside the inlined copy).
 */
const INLINED = ['@modelcontextprotocol/core', 'zod']

const fail = msg => { process.stderr.write(`[build] ${msg}\n`); process.exit(1) }

/** The package name of a bare specifier ('@scope/name/sub' → '@scope/name'), or null for a relative, absolute or node: one. */
function packageOf (spec) {
  if (spec.startsWith('.') || spec.startsWith('/') || spec.startsWith('node:') || spec.includes(':')) return null
  const parts = spec.split('/')
  return spec.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0]
}

/** The directory of an installed package (its package.json's), found from its resolved entry. */
function packageRoot (name) {
  let dir = dirname(fileURLToPath(import.meta.resolve(name)))
  for (;;) {
    const manifest = join(dir, 'package.json')
    if (existsSync(manifest) && JSON.parse(readFileSync(manifest, 'utf8')).name === name) return dir
    const up = dirname(dir)
    if (up === dir) fail(`no package.json named ${name} above its entry`)
    dir = up
  }
}

// 1. TypeScript (type errors fail the build), into a scratch directory: the bundles below are what runs.
rmSync(dist, { recursive: true, force: true })
const compiled = mkdtempSync(join(tmpdir(), 'cubicle-tsc-'))
process.on('exit', () => rmSync(compiled, { recursive: true, force: true }))
execFileSync(process.execPath, [join(root, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.build.json', '--outDir', compiled], { cwd: root, stdio: 'inherit' })

// 2. Our own modules, bundled from the server's entry into dist/core/ (the directory of every core
// module, so their import.meta.url-relative paths keep working: core/version.ts, core/asset-dir.ts,
// plugins/prompt-render), with chunks for the literal dynamic imports (an engine's plugin loads only
// when selected). Every bare import stays an import; esbuild parses each module (no text matching),
// so its metafile lists each module's imports as written.
const app = await build({
  entryPoints: [join(compiled, 'core/server.js')],
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'node',
  outdir: join(dist, 'core'),
  chunkNames: 'chunk-[hash]',
  // Functions and classes keep their names: esbuild renames a top-level one whose name another module
  // also uses (chatOf2) and a class that refers to itself (_KubeError); logs show err.constructor.name.
  keepNames: true,
  // Paths relative to the compiled tree: each module's marker comment names it (// plugins/x/y.js), same every build.
  absWorkingDir: compiled,
  metafile: true,
  logLevel: 'warning',
  plugins: [{
    name: 'packages-external',
    setup (b) { b.onResolve({ filter: /^[^./]/ }, args => args.kind === 'entry-point' ? undefined : { path: args.path, external: true }) }
  }]
}).catch(err => fail(`app bundle: ${err.message}`))
/** Subpaths of each vendored package that our modules import ('.', './value', ...). */
const subpaths = new Map(VENDORED.map(name => [name, new Set()]))
for (const [file, input] of Object.entries(app.metafile.inputs)) {
  if (!join(compiled, file).startsWith(compiled + sep)) fail(`app bundle: ${file} is not one of our compiled modules`)
  for (const imp of input.imports) {
    if (!imp.external) continue
    const name = packageOf(imp.path)
    if (INLINED.includes(name)) fail(`${file} imports ${imp.path}, which is inlined into the vendor bundle: vendor it (VENDORED) or import it elsewhere`)
    if (name === null || !subpaths.has(name)) continue
    if (imp.kind === 'require-call' || imp.kind === 'require-resolve') fail(`${file} requires ${imp.path}: the vendored copy is an ES module only`)
    subpaths.get(name).add(imp.path === name ? '.' : '.' + imp.path.slice(name.length))
  }
}

// 3. The bundle: one esbuild run, an entry point per imported subpath, chunks shared between them.
const entryPoints = []
for (const [name, subs] of subpaths) {
  if (subs.size === 0) fail(`${name} is in VENDORED but none of our modules imports it: remove it from scripts/build.mjs`)
  for (const sub of subs) {
    const spec = sub === '.' ? name : name + sub.slice(1)
    entryPoints.push({ in: fileURLToPath(import.meta.resolve(spec)), out: join(name, sub === '.' ? 'index' : sub.slice(2)) })
  }
}
const vendorRoots = [...VENDORED, ...INLINED].map(name => packageRoot(name) + sep)
const vendored = await build({
  entryPoints,
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'node',
  outdir: vendorDir,
  chunkNames: '_chunks/[name]-[hash]',
  absWorkingDir: root,
  metafile: true,
  logLevel: 'warning',
  plugins: [{
    name: 'vendor-only',
    setup (b) {
      // A bare import from inside a vendored package that leaves the vendored set fails the build:
      // bundling it could make a second copy of a package something else loads, and leaving it
      // external must resolve to the same file from dist/node_modules as from the original.
      b.onResolve({ filter: /^[^./]/ }, args => {
        const name = packageOf(args.path)
        if (name === null || isBuiltin(args.path) || VENDORED.includes(name) || INLINED.includes(name) || args.kind === 'entry-point') return undefined
        if (!vendorRoots.some(dir => args.importer.startsWith(dir))) return undefined
        return { errors: [{ text: `${args.importer} imports ${args.path}, which is neither in VENDORED nor in INLINED (scripts/build.mjs)` }] }
      })
    }
  }]
}).catch(err => fail(`vendor bundle: ${err.message}`))
for (const [path, input] of Object.entries(vendored.metafile.inputs)) {
  if (input.format === 'cjs') fail(`vendor bundle: ${path} is CommonJS; vendor only ES module packages`)
  if (!vendorRoots.some(dir => join(root, path).startsWith(dir))) fail(`vendor bundle: ${path} is outside the vendored packages`)
}

// 4. A package.json per vendored package, whose exports are exactly the bundled subpaths.
for (const [name, subs] of subpaths) {
  const exports = {}
  for (const sub of [...subs].sort()) exports[sub] = `./${sub === '.' ? 'index' : sub.slice(2)}.js`
  const { version } = JSON.parse(readFileSync(join(packageRoot(name), 'package.json'), 'utf8'))
  mkdirSync(join(vendorDir, name), { recursive: true })
  writeFileSync(join(vendorDir, name, 'package.json'), JSON.stringify({ name, version, type: 'module', private: true, description: 'Bundled by scripts/build.mjs', exports }, null, 2) + '\n')
  for (const target of Object.values(exports)) if (!existsSync(join(vendorDir, name, target))) fail(`vendor bundle: ${name}/${target} is missing`)
}

// 5. Every vendored import of our modules must resolve into the bundle, as Node resolves it at run time.
const probe = `
const want = JSON.parse(process.argv[2])
for (const spec of want) {
  const url = import.meta.resolve(spec)
  if (!url.startsWith(new URL('../node_modules/', import.meta.url).href)) { console.error(spec + ' resolves to ' + url); process.exit(1) }
}`
const specs = [...subpaths].flatMap(([name, subs]) => [...subs].map(sub => sub === '.' ? name : name + sub.slice(1)))
const probeFile = join(dist, 'core', '.vendor-probe.mjs')
writeFileSync(probeFile, probe)
try {
  execFileSync(process.execPath, [probeFile, JSON.stringify(specs)], { stdio: 'inherit' })
} catch { fail('a vendored import does not resolve into dist/node_modules from dist/core') } finally { rmSync(probeFile) }

const count = meta => [Object.keys(meta.inputs).length, Object.keys(meta.outputs).filter(f => f.endsWith('.js')).length]
const [ours, ourFiles] = count(app.metafile)
process.stderr.write(`[build] our ${ours} modules in ${ourFiles} files (dist/core)\n`)
const [modules, files] = count(vendored.metafile)
process.stderr.write(`[build] vendored ${[...VENDORED, ...INLINED].join(', ')}: ${modules} modules in ${files} files (dist/node_modules)\n`)
