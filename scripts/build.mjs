// `npm run build`: the TypeScript build (dist/), then the vendor bundle (docs/architecture.md#the-build).
// Every ES module Node loads costs about 28 KiB of resident memory beyond its JS heap, and some
// packages ship hundreds of small ones (typebox: 683 of the 1,819 modules the server loaded at boot,
// docs/performance.md). esbuild bundles the packages in VENDORED, which only our code imports, into
// dist/node_modules/<name>/: a few files per package, with one copy of every internal module shared by
// its entry points (code splitting). Node resolves a bare `import 'typebox'` from any file under dist/
// to dist/node_modules/typebox before the project's node_modules, so dist's imports need no rewriting;
// the checks below make sure every one of them lands in the bundle and that the bundle holds no
// second copy of a package something else loads.
import { execFileSync } from 'node:child_process'
import { existsSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { isBuiltin } from 'node:module'
import { dirname, join, sep } from 'node:path'
import { fileURLToPath } from 'node:url'
import { build } from 'esbuild'

const root = fileURLToPath(new URL('..', import.meta.url))
const dist = join(root, 'dist')
const vendorDir = join(dist, 'node_modules')

/**
 * Packages bundled into dist/node_modules, as the entries dist imports. A package belongs here only if
 * nothing in node_modules that the server loads imports it (that importer would load the original, a
 * second copy) and its code is ES modules.
 */
const VENDORED = ['typebox', '@modelcontextprotocol/server']
/**
 * Packages that only the vendored ones import, inlined into their bundle (same conditions); dist must
 * not import them (it would load the original beside the inlined copy).
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

function jsFiles (dir) {
  const out = []
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name)
    if (entry.isDirectory()) { if (path !== vendorDir) out.push(...jsFiles(path)) } else if (entry.name.endsWith('.js')) out.push(path)
  }
  return out
}

// 1. TypeScript, as before (type errors fail the build).
rmSync(dist, { recursive: true, force: true })
execFileSync(process.execPath, [join(root, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.build.json'], { cwd: root, stdio: 'inherit' })

// 2. Every import in dist, as written: esbuild parses each file (no text matching) with every import
// external, so its metafile lists each file's static imports and literal dynamic ones.
const scan = await build({
  entryPoints: jsFiles(dist),
  bundle: true,
  write: false,
  metafile: true,
  platform: 'node',
  format: 'esm',
  outdir: join(root, '.build-scan'),
  absWorkingDir: root,
  logLevel: 'silent',
  plugins: [{
    name: 'all-external',
    setup (b) { b.onResolve({ filter: /.*/ }, args => args.kind === 'entry-point' ? undefined : { path: args.path, external: true }) }
  }]
})
/** Subpaths of each vendored package that dist imports ('.', './value', ...). */
const subpaths = new Map(VENDORED.map(name => [name, new Set()]))
for (const [file, input] of Object.entries(scan.metafile.inputs)) {
  for (const imp of input.imports) {
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
  if (subs.size === 0) fail(`${name} is in VENDORED but nothing in dist imports it: remove it from scripts/build.mjs`)
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

// 5. Every vendored import in dist must resolve into the bundle, as Node resolves it at run time.
const probe = `
const want = JSON.parse(process.argv[2])
for (const spec of want) {
  const url = import.meta.resolve(spec)
  if (!url.startsWith(new URL('./node_modules/', import.meta.url).href)) { console.error(spec + ' resolves to ' + url); process.exit(1) }
}`
const specs = [...subpaths].flatMap(([name, subs]) => [...subs].map(sub => sub === '.' ? name : name + sub.slice(1)))
const probeFile = join(dist, '.vendor-probe.mjs')
writeFileSync(probeFile, probe)
try {
  execFileSync(process.execPath, [probeFile, JSON.stringify(specs)], { stdio: 'inherit' })
} catch { fail('a vendored import does not resolve into dist/node_modules') } finally { rmSync(probeFile) }

const files = Object.keys(vendored.metafile.outputs).filter(f => f.endsWith('.js')).length
const modules = Object.keys(vendored.metafile.inputs).length
process.stderr.write(`[build] vendored ${[...VENDORED, ...INLINED].join(', ')}: ${modules} modules in ${files} files (dist/node_modules)\n`)
