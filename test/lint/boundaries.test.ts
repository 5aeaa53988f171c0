/*
 * The module boundaries of docs/conventions.md#how-plugins-talk that eslint.config.js enforces, proved on
 * probe files: a plugin imports another plugin only as `import type` from its types.ts, and core/ never
 * imports plugins/. That the whole tree passes the lint is `npm run lint` (run by .ci/run before the
 * tests; docs/testing.md).
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

// One ESLint process for all probes (a few seconds: it lints six one-line files).
const run = await promisify(execFile)(process.execPath, [child, JSON.stringify(probes)], { maxBuffer: 1 << 20, timeout: 120_000 })
const result = JSON.parse(run.stdout) as { probes: Record<keyof typeof probes, string[]> }

t.test('the boundary rule refuses a plugin reaching into another plugin or core into plugins, and allows the rest', async t => {
  const hit = (name: keyof typeof probes): boolean => result.probes[name].includes(RESTRICTED)
  t.ok(hit('otherModule'), 'a plugin importing another plugin\'s module is refused')
  t.ok(hit('valueOfTypes'), 'a value import of another plugin\'s types.ts is refused')
  t.notOk(hit('typeOfTypes'), 'import type of another plugin\'s types.ts is allowed')
  t.notOk(hit('ownModule'), 'a plugin\'s own modules are allowed')
  t.notOk(hit('core'), 'core modules are allowed in plugins')
  t.ok(hit('coreToPlugin'), 'core importing a plugin is refused')
})
