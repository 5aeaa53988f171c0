import t from 'tap'
import { readFileSync } from 'node:fs'
import { ConfigSchema } from '../../core/config.js'

t.test('the README settings table lists every configuration variable with its default', async t => {
  const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8')
  for (const [name, schema] of Object.entries(ConfigSchema.properties as Record<string, { default?: unknown }>)) {
    const row = readme.split('\n').find(line => line.startsWith(`| \`${name}\` |`))
    t.ok(row, `${name} has a row`)
    const shown = schema.default === '' ? '(empty)' : String(schema.default)
    t.match(row ?? '', `\`${shown}\``, `${name} shows its default`)
  }
  t.match(readme, /npm test/)
  t.match(readme, /npm start/)
})
