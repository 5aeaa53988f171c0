import t from 'tap'
import { createAddressMap } from '../../../plugins/egress/address-map.js'

t.test('an address belongs to one chat at a time; a chat has one address', async t => {
  const map = createAddressMap()
  map.assign('a', '172.20.0.2')
  map.assign('b', '172.20.0.3')
  t.equal(map.chatOf('172.20.0.2'), 'a')
  t.equal(map.chatOf('172.20.0.3'), 'b')

  // a restarts and gets another address: its old one is no longer a's.
  map.assign('a', '172.20.0.4')
  t.equal(map.chatOf('172.20.0.4'), 'a')
  t.equal(map.chatOf('172.20.0.2'), null, 'the old address is dropped')

  // c starts on b's address (b stopped behind our back, nobody said so): the address is c's, never b's.
  map.assign('c', '172.20.0.3')
  t.equal(map.chatOf('172.20.0.3'), 'c')
  // b comes back on a free address; dropping or moving b never takes c's address away.
  map.assign('b', '172.20.0.2')
  t.equal(map.chatOf('172.20.0.3'), 'c', 'c keeps the address it took from b')
  t.equal(map.chatOf('172.20.0.2'), 'b')
  map.assign('b', null)
  t.equal(map.chatOf('172.20.0.2'), null)
  t.equal(map.chatOf('172.20.0.3'), 'c')
  t.equal(map.size, 2)
})

t.test('a stop (null) removes only the chat\'s own address; the same address again is a no-op', async t => {
  const map = createAddressMap()
  map.assign('a', '10.0.0.2')
  map.assign('a', '10.0.0.2')
  t.equal(map.size, 1)
  map.assign('b', '10.0.0.2')
  map.assign('a', null)
  t.equal(map.chatOf('10.0.0.2'), 'b', 'a stop of the chat that lost the address leaves the new holder')
  map.assign('zzz', null)
  t.equal(map.size, 1)
})
