/*
 * docs/conventions.md#how-plugins-talk: conventions enforced. The whole tree passes neostandard (eslint.config.js), and the module
 * boundaries of docs/conventions.md#how-plugins-talk hold: a plugin imports another plugin only as `import type` from its types.ts,
 * and core/ never imports plugins/.
 */
import t from 'tap'
import { execFile } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'

const child = fileURLToPath(new URL('./eslint-child.mjs', import.meta.url))
const RESTRICTED = '@typescript-eslint/no-restricted-imports'

const probes = {
  otherModule: { file: 'plugins/uploads/boundary-probe.ts', code: "import { x } from '../files/service.js'\nexport const y = x\n" },
  valueOfTypes: { file: 'plugins/uploads/boundary-probe.ts', code: "import { x } from '../files/types.js'\nexport const y = x\n" },
  typeOfTypes: { file: 'plugins/uploads/boundary-probe.ts', code: "import type { X } from '../files/types.js'\nexport type Y = X\n" },
  ownModule: { file: 'plugins/uploads/boundary-probe.ts', code: "import { x } from './local.js'\nexport const y = x\n" },
  core: { file: 'plugins/uploads/boundary-probe.ts', code: "import { x } from '../../core/config.js'\nexport const y = x\n" },
  coreToPlugin: { file: 'core/boundary-probe.ts', code: "import { x } from '../plugins/files/service.js'\nexport const y = x\n" }
}

// One ESLint process for the probes and the tree (about a minute on 2 cores).
const run = await promisify(execFile)(process.execPath, [child, JSON.stringify(probes), 'tree'], { maxBuffer: 64 << 20, timeout: 300_000 })
const result = JSON.parse(run.stdout) as { probes: Record<keyof typeof probes, string[]>, findings: string[] }

t.test('the boundary rule refuses what docs/conventions.md#how-plugins-talk forbids and allows what it allows', async t => {
  const hit = (name: keyof typeof probes): boolean => result.probes[name].includes(RESTRICTED)
  t.ok(hit('otherModule'), 'a plugin importing another plugin\'s module is refused')
  t.ok(hit('valueOfTypes'), 'a value import of another plugin\'s types.ts is refused')
  t.notOk(hit('typeOfTypes'), 'import type of another plugin\'s types.ts is allowed')
  t.notOk(hit('ownModule'), 'a plugin\'s own modules are allowed')
  t.notOk(hit('core'), 'core modules are allowed in plugins')
  t.ok(hit('coreToPlugin'), 'core importing a plugin is refused')
})

t.test('the tree passes the lint (`npx eslint . --fix` repairs most style findings)', async t => {
  t.same(result.findings, [], `${result.findings.length} findings`)
})
