import t from 'tap'
import { ATTACH_ARGV, frame, parseClientMessage, parseHeader, parseSize } from '../../../plugins/terminal/protocol.js'

const b = (s: string): Buffer => Buffer.from(s, 'utf8')

t.test('client messages in ttyd framing', async t => {
  t.same(parseClientMessage(b('0ls -la\r')), { type: 'input', data: b('ls -la\r') })
  t.same(parseClientMessage(b('0ü€😀')), { type: 'input', data: b('ü€😀') }, 'UTF-8 input passes as bytes')
  t.same(parseClientMessage(b('1{"columns":120,"rows":40}')), { type: 'resize', size: { columns: 120, rows: 40 } })
  t.same(parseClientMessage(b('{"AuthToken":"x","columns":90,"rows":20}')), { type: 'resize', size: { columns: 90, rows: 20 } }, 'a later JSON message resizes')
  t.same(parseClientMessage(b('2')), { type: 'pause' })
  t.same(parseClientMessage(b('3')), { type: 'resume' })
  t.equal(parseClientMessage(b('')).type, 'ignored')
  t.equal(parseClientMessage(b('7abc')).type, 'ignored')
  t.equal(parseClientMessage(b('1{"columns":"80","rows":24}')).type, 'ignored', 'sizes must be numbers')
  t.equal(parseClientMessage(b('1[80,24]')).type, 'ignored')
  t.equal(parseClientMessage(b(`1{"columns":80,"rows":24,"pad":"${'x'.repeat(2000)}"}`)).type, 'ignored', 'a size message is small')
})

t.test('sizes are rounded and clamped to 1..1000 columns and 1..500 rows', async t => {
  t.same(parseSize(b('{"columns":100.6,"rows":29.4}')), { columns: 101, rows: 29 })
  t.same(parseSize(b('{"columns":0,"rows":-4}')), { columns: 1, rows: 1 })
  t.same(parseSize(b('{"columns":100000,"rows":100000}')), { columns: 1000, rows: 500 })
  t.equal(parseSize(b('{"columns":null,"rows":5}')), null)
  t.equal(parseSize(b('not json')), null)
})

t.test('server frames carry the command byte and the payload unchanged', async t => {
  t.same(frame(0x30, b('héllo')), Buffer.concat([b('0'), b('héllo')]))
  t.same(frame(0x31, 'title'), b('1title'))
  t.same(frame(0x32, '{}'), b('2{}'))
})

t.test('the attach header is recognised, split across chunks, and never mistaken for output', async t => {
  const header = '\x1b]cubicle;24;148790\x07'
  t.same(parseHeader(b(`${header}prompt$ `)), { state: 'done', identity: { pid: 24, start: '148790' }, rest: b('prompt$ ') })
  t.same(parseHeader(b(header.slice(0, 5))), { state: 'more' })
  t.same(parseHeader(b('\x1b]cubi')), { state: 'more' })
  const plain = parseHeader(b('\x1b[2Jhello'))
  t.same(plain, { state: 'done', identity: null, rest: b('\x1b[2Jhello') }, 'other output passes untouched')
  const bad = parseHeader(b('\x1b]cubicle;0;1\x07x'))
  t.same(bad, { state: 'done', identity: null, rest: b('\x1b]cubicle;0;1\x07x') }, 'pid 0 is not an identity')
  const endless = parseHeader(b(`\x1b]cubicle;${'9'.repeat(100)}`))
  t.equal(endless.state, 'done', 'a header that never ends is given up after 64 bytes')
  t.match(ATTACH_ARGV[2], /exec tmux -u new-session -A -s main$/)
})
