/*
 * Untrusted text handled in the server (hostile inputs from the sandbox): what in-sandbox helpers print (a planted PIL
 * module, a flood of error lines) costs one look at the last line, never a split or a parse of megabytes;
 * a view_range string is parsed only when it could be a pair of numbers.
 */
import t from 'tap'
import { parseImageReport } from '../../../plugins/workspace-tools/image-script.js'
import { errorReason } from '../../../plugins/workspace-tools/sandbox-files.js'
import { prepareViewArgs } from '../../../plugins/workspace-tools/view-tool.js'

t.test('the image report is the last stderr line, parsed only when it is report-sized', async t => {
  t.same(parseImageReport('warning\n{"width":10,"height":5,"outWidth":10,"outHeight":5}\n\n'), { width: 10, height: 5, outWidth: 10, outHeight: 5 })
  t.same(parseImageReport('\n{"error":"decode","detail":"bad"}\n'), { error: 'decode', detail: 'bad' })
  t.equal(parseImageReport(''), undefined)
  t.equal(parseImageReport('\n\n  \n'), undefined)
  // 16 MiB of nesting: JSON.parse would spend seconds on it; the report is refused unread.
  const bomb = '['.repeat(8 << 20) + ']'.repeat(8 << 20)
  const started = process.cpuUsage()
  t.equal(parseImageReport(`${'\n'.repeat(1 << 20)}${bomb}\n`), undefined)
  const used = process.cpuUsage(started)
  t.ok((used.user + used.system) / 1000 < 2000, 'answered without parsing the bomb')
})

t.test('errorReason reads the reason of the last non-blank line only', async t => {
  t.equal(errorReason("mkdir: cannot create directory '/x': Permission denied\n"), 'Permission denied')
  t.equal(errorReason('find: a: Permission denied\nfind: b: No such file or directory\n\n  \n'), 'No such file or directory')
  t.equal(errorReason(''), 'unknown error')
  t.equal(errorReason(`${'noise\n'.repeat(1 << 20)}cat: x: Is a directory\n`), 'Is a directory')
  t.equal(errorReason(`e: ${'r'.repeat(1000)}`).length, 300)
})

t.test('a view_range string is parsed only when it is short enough to be a pair of numbers', async t => {
  t.same(prepareViewArgs({ view_range: ' [2, 3] ' }).view_range, [2, 3])
  t.same(prepareViewArgs({ view_range: ['4', ' -1 '] }).view_range, [4, -1])
  t.equal(prepareViewArgs({ view_range: 'null' }).view_range, null)
  const nested = '['.repeat(4 << 20) + ']'.repeat(4 << 20)
  const started = process.cpuUsage()
  t.equal(prepareViewArgs({ view_range: nested }).view_range, nested, 'left for validation to refuse')
  const used = process.cpuUsage(started)
  t.ok((used.user + used.system) / 1000 < 1000, 'not parsed')
})
