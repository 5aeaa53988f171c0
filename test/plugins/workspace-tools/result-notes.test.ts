// Notes other plugins add to bash_tool results (workspace-tools ResultNote: the ports plugin's new listening ports).
import t from 'tap'
import { appendNotes, resultNotes } from '../../../plugins/workspace-tools/bash-result.js'

t.test('result notes: answers in registration order, failures, empty and late answers left out', async t => {
  const notes = [
    async () => 'first',
    async () => { throw new Error('boom') },
    async () => undefined,
    async () => '',
    async () => await new Promise<string>(resolve => { setTimeout(() => { resolve('late') }, 500) }),
    async (chatId: string) => `for ${chatId}`
  ]
  const started = Date.now()
  t.same(await resultNotes(notes, 'chat-a', 100), ['first', 'for chat-a'])
  t.ok(Date.now() - started < 450, 'a slow note does not hold the result')
  t.same(await resultNotes([], 'chat-a'), [])
})

t.test('notes are appended while they fit the limit', async t => {
  t.equal(appendNotes('out', ['[a]', '[b]'], 100), 'out\n\n[a]\n\n[b]')
  t.equal(appendNotes('out', ['x'.repeat(50), '[b]'], 20), 'out\n\n[b]', 'one that does not fit is left out, the next still goes')
})
