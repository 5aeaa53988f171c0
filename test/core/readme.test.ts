import t from 'tap'
import { readFileSync } from 'node:fs'

t.test('the README names the two commands', async t => {
  const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8')
  t.match(readme, /npm test/)
  t.match(readme, /npm start/)
})
