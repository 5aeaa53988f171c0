import t from 'tap'
import { loadConfig } from '../../core/config.js'
import { derivePoolSize } from '../../core/config-derive.js'

const GIB = 1024 ** 3

t.test('SANDBOX_POOL_SIZE auto: min(2, CPUs, memory / 2 GiB)', async t => {
  t.equal(derivePoolSize('auto', { cpus: 8, memory: 64 * GIB }), 2, 'a large machine keeps 2')
  t.equal(derivePoolSize('auto', { cpus: 2, memory: 4 * GIB }), 2, '2 CPUs and 4 GiB: 2')
  t.equal(derivePoolSize('auto', { cpus: 1, memory: 16 * GIB }), 1, 'one CPU: 1')
  t.equal(derivePoolSize('auto', { cpus: 4, memory: 3.5 * GIB }), 1, '2 to 4 GiB: 1')
  t.equal(derivePoolSize('auto', { cpus: 4, memory: 1.5 * GIB }), 0, 'below 2 GiB: no pool')
  t.equal(derivePoolSize('7', { cpus: 1, memory: GIB }), 7, 'a number is taken as it is')
})

t.test('the default is auto, resolved for this machine; numbers 0 to 20; anything else stops the boot', async t => {
  const def = loadConfig({})
  t.equal(def.SANDBOX_POOL_SIZE, 'auto')
  t.equal(def.sandboxPoolSize, derivePoolSize('auto'))
  t.equal(loadConfig({ SANDBOX_POOL_SIZE: '0' }).sandboxPoolSize, 0)
  t.equal(loadConfig({ SANDBOX_POOL_SIZE: '20' }).sandboxPoolSize, 20)
  t.throws(() => loadConfig({ SANDBOX_POOL_SIZE: '21' }), { code: 'CORE_INVALID_CONFIG' })
  t.throws(() => loadConfig({ SANDBOX_POOL_SIZE: 'many' }), /SANDBOX_POOL_SIZE/)
})
