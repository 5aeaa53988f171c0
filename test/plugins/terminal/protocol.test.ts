import t from 'tap'
import { ATTACH_ARGV, detachArgv, frame, parseClientMessage, parseSize } from '../../../plugins/terminal/protocol.js'
import { exitMessage } from '../../../plugins/terminal/viewer.js'

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

t.test('viewers attach to session main; detaching takes the viewer id as an argument, hex only', async t => {
  t.same(ATTACH_ARGV, ['tmux', '-u', 'new-session', '-A', '-s', 'main'])
  const argv = detachArgv('0123456789abcdef01234567')
  t.same(argv.slice(3), ['cubicle-detach', '0123456789abcdef01234567'])
  t.match(argv[2], /kill -HUP/)
  t.throws(() => detachArgv('x; reboot'))
  t.throws(() => detachArgv(''))
})

t.test('the tmux client\'s last line says why it ended', async t => {
  t.equal(exitMessage('\x1b[?1049l\x1b[23;0;0t[exited]\r\n'), 'ended')
  t.equal(exitMessage('[server exited]\r\n'), 'ended')
  t.equal(exitMessage('[detached (from session main)]\r\n'), 'detached')
  t.equal(exitMessage('[lost tty]\r\n'), 'detached')
  t.equal(exitMessage('[terminated]\r\n'), 'detached')
  t.equal(exitMessage('echo [exited]\r\n$ '), null, 'only as the very last output')
  t.equal(exitMessage(''), null, 'killed without a word')
})
