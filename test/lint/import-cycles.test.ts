/*
 * No import cycles (docs/conventions.md#how-plugins-talk, docs/engine.md#the-core-inside). Every relative
 * import of plugins/ and core/ is read with the TypeScript compiler's parser (no type checking: about a
 * second for the tree) and the graph's strongly connected components are the cycles.
 *
 * - A module that loads at run time (`import … from`, `import './x'`, `export … from`, `import()`) takes
 *   part in no cycle anywhere: a cycle makes the load order decide which module sees the other half
 *   initialised.
 * - `import type` / `export type … from` is erased from the output (`verbatimModuleSyntax`), so outside the
 *   sandbox core it may close a cycle: an implementation naming the interface its registry declares
 *   (sub-agent's event readers, config-derive's view of config) adds no load-order dependency. An
 *   `import { type A }` is not erased (it still loads the module) and counts as a value import.
 * - plugins/sandbox/ allows no cycle at all, type-only imports included: it was one 21-file cycle around a
 *   shared registry, and a type cycle there is how such a god object comes back. Its state lives in
 *   objects that service.ts hands to the roles that need them.
 */
import t from 'tap'
import ts from 'typescript'
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join, relative, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = fileURLToPath(new URL('../..', import.meta.url))

interface Edge { to: string, typeOnly: boolean }

function sources (dir: string): string[] {
  return readdirSync(dir).flatMap(name => {
    const path = join(dir, name)
    if (name === 'node_modules' || name === 'public') return []
    if (statSync(path).isDirectory()) return sources(path)
    return name.endsWith('.ts') && !name.endsWith('.d.ts') ? [path] : []
  })
}

const parsed = new Map<string, Edge[]>()

/** The relative imports of one file, resolved to files, each marked type-only when the compiler erases it (read once). */
function importsOf (file: string): Edge[] {
  const known = parsed.get(file)
  if (known !== undefined) return known
  const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, false)
  const edges: Edge[] = []
  const add = (spec: string, typeOnly: boolean): void => {
    if (!spec.startsWith('.')) return
    const target = resolve(dirname(file), spec.replace(/\.js$/, '.ts'))
    const to = existsSync(target) ? target : join(target.replace(/\.ts$/, ''), 'index.ts')
    if (existsSync(to)) edges.push({ to, typeOnly })
  }
  const visit = (node: ts.Node): void => {
    if (ts.isImportDeclaration(node) && ts.isStringLiteral(node.moduleSpecifier)) {
      add(node.moduleSpecifier.text, node.importClause?.isTypeOnly === true)
    } else if (ts.isExportDeclaration(node) && node.moduleSpecifier !== undefined && ts.isStringLiteral(node.moduleSpecifier)) {
      add(node.moduleSpecifier.text, node.isTypeOnly)
    } else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword) {
      const [arg] = node.arguments
      if (arg !== undefined && ts.isStringLiteral(arg)) add(arg.text, false)
    }
    ts.forEachChild(node, visit)
  }
  visit(source)
  parsed.set(file, edges)
  return edges
}

type Graph = Map<string, string[]>

function graphOf (files: string[], keep: (from: string, edge: Edge) => boolean): Graph {
  const known = new Set(files)
  return new Map(files.map(f => [f, importsOf(f).filter(e => known.has(e.to) && keep(f, e)).map(e => e.to)]))
}

/** Each cycle as a path that closes on its first file (Tarjan's components, then a walk inside each). */
function cycles (graph: Graph): string[][] {
  let next = 0
  const index = new Map<string, number>()
  const low = new Map<string, number>()
  const stack: string[] = []
  const onStack = new Set<string>()
  const components: string[][] = []
  const connect = (v: string): void => {
    index.set(v, next); low.set(v, next); next++
    stack.push(v); onStack.add(v)
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) { connect(w); low.set(v, Math.min(low.get(v) as number, low.get(w) as number)) } else if (onStack.has(w)) low.set(v, Math.min(low.get(v) as number, index.get(w) as number))
    }
    if (low.get(v) !== index.get(v)) return
    const c: string[] = []
    let w: string | undefined
    do { w = stack.pop() as string; onStack.delete(w); c.push(w) } while (w !== v)
    if (c.length > 1 || (graph.get(v) ?? []).includes(v)) components.push(c)
  }
  for (const v of graph.keys()) if (!index.has(v)) connect(v)
  return components.map(c => {
    const inside = new Set(c)
    const start = [...c].sort()[0] as string
    // Breadth-first from start back to start, inside the component: the shortest cycle through it.
    const from = new Map<string, string>()
    const queue = [start]
    while (queue.length > 0) {
      const v = queue.shift() as string
      for (const w of graph.get(v) ?? []) {
        if (!inside.has(w)) continue
        if (w === start) {
          const path = [start]
          for (let u: string | undefined = v; u !== undefined && u !== start; u = from.get(u)) path.splice(1, 0, u)
          return [...path, start]
        }
        if (!from.has(w)) { from.set(w, v); queue.push(w) }
      }
    }
    return [...c, c[0] as string]
  })
}

const show = (base: string, found: string[][]): string[] => found.map(c => c.map(f => relative(base, f)).join(' → '))
const strict = (dir: string) => (from: string): boolean => from.startsWith(dir)
/** The two rules over the files of `base`: value imports everywhere, every import inside `strictDir`. */
function check (base: string, strictDir: string): string[] {
  const files = [...sources(join(base, 'plugins')), ...(existsSync(join(base, 'core')) ? sources(join(base, 'core')) : [])]
  const inStrict = strict(join(base, strictDir) + '/')
  return show(base, cycles(graphOf(files, (from, e) => !e.typeOnly || (inStrict(from) && inStrict(e.to)))))
}

t.test('no import cycle in plugins/ and core/ (value imports), none at all in plugins/sandbox/', async t => {
  const files = [...sources(join(root, 'plugins')), ...sources(join(root, 'core'))]
  t.ok(files.length > 200, `${files.length} files read`)
  t.ok(files.some(f => f.endsWith('plugins/sandbox/service.ts')))
  t.same(check(root, 'plugins/sandbox'), [], 'break these cycles: hand the state to the code that needs it instead (docs/engine.md#the-core-inside)')
})

/** Which plugins each plugin imports (any import, `import type` included: it names the other's contract). */
function pluginGraph (): Graph {
  const dir = join(root, 'plugins')
  const graph: Graph = new Map()
  for (const file of sources(dir)) {
    const from = relative(dir, file).split('/')[0] as string
    const to = importsOf(file).map(e => relative(dir, e.to).split('/')[0] as string).filter(p => p !== from && !p.startsWith('..'))
    graph.set(from, [...new Set([...(graph.get(from) ?? []), ...to])])
  }
  return graph
}

t.test('plugins depend on each other without a cycle, and the bash_tool path reads one way', async t => {
  const graph = pluginGraph()
  t.same(cycles(graph).map(c => c.join(' → ')), [], 'no cycle between plugins')
  const above = (plugin: string): string[] => (graph.get(plugin) ?? []).filter(p => p === 'mcp-transport' || p === 'workspace-tools')
  t.same(above('sandbox'), [], 'the sandbox core imports no tool and not the transport (they call it, never the reverse); services below it, such as chat-storage, it may use')
  t.notOk(graph.get('mcp-transport')?.some(p => p === 'workspace-tools' || p.startsWith('sandbox')), 'the transport knows no tool and no sandbox')
  for (const engine of ['sandbox-docker', 'sandbox-memory']) {
    t.ok(graph.get(engine)?.includes('sandbox'), `${engine} implements the core's contract`)
    t.same([...above(engine), ...(graph.get(engine) ?? []).filter(p => p === 'sandbox-docker' || p === 'sandbox-memory')], [], `${engine} knows no tool, no transport, no other engine`)
  }
  t.ok(graph.get('workspace-tools')?.includes('sandbox'), 'the tool calls the sandbox service')
})

t.test('the check finds a value cycle, a type cycle in the sandbox core, and a three-file loop; it allows an erased type cycle elsewhere', async t => {
  const dir = mkdtempSync(join(tmpdir(), 'cycles-'))
  t.teardown(() => { rmSync(dir, { recursive: true, force: true }) })
  const put = (path: string, code: string): void => {
    mkdirSync(dirname(join(dir, path)), { recursive: true })
    writeFileSync(join(dir, path), code)
  }
  put('plugins/a/one.ts', "import { two } from './two.js'\nexport const one = (): number => two + 1\n")
  put('plugins/a/two.ts', "import { one } from './one.js'\nexport const two = 2\nexport const back = (): number => one()\n")
  put('plugins/b/reg.ts', "import { impl } from './impl.js'\nexport interface Reader { read: () => void }\nexport const readers = [impl]\n")
  put('plugins/b/impl.ts', "import type { Reader } from './reg.js'\nexport const impl: Reader = { read: () => {} }\n")
  put('plugins/c/inline.ts', "import { type Shape } from './loaded.js'\nexport interface Base { x: number }\nexport type S = Shape\n")
  put('plugins/c/loaded.ts', "import { type Base } from './inline.js'\nexport interface Shape extends Base { y: number }\n")
  put('plugins/sandbox/state.ts', "import type { Role } from './role.js'\nexport interface State { role?: Role }\n")
  put('plugins/sandbox/role.ts', "import type { State } from './state.js'\nexport interface Role { state: State }\n")
  put('plugins/d/x.ts', "export { y } from './y.js'\nexport const x = 1\n")
  put('plugins/d/y.ts', "import('./z.js').catch(() => {})\nexport const y = 2\n")
  put('plugins/d/z.ts', "import './x.js'\nexport const z = 3\n")
  t.same(check(dir, 'plugins/sandbox').sort(), [
    'plugins/a/one.ts → plugins/a/two.ts → plugins/a/one.ts',
    'plugins/c/inline.ts → plugins/c/loaded.ts → plugins/c/inline.ts',
    'plugins/d/x.ts → plugins/d/y.ts → plugins/d/z.ts → plugins/d/x.ts',
    'plugins/sandbox/role.ts → plugins/sandbox/state.ts → plugins/sandbox/role.ts'
  ], 'value cycle, inline `type` specifier (still loads), type cycle in the sandbox core, export-from and import() loop; not the erased type cycle of plugins/b')
})
