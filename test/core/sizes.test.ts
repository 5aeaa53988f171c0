import t from 'tap'
import { compactSize, humanSize } from '../../core/sizes.js'

t.test('sizes in words (descriptions and messages)', async t => {
  t.equal(humanSize(0), '0 bytes')
  t.equal(humanSize(1), '1 byte')
  t.equal(humanSize(512), '512 bytes')
  t.equal(humanSize(1024), '1.0 KiB')
  t.equal(humanSize(12_595), '12.3 KiB')
  t.equal(humanSize(4 * 1024 * 1024), '4.0 MiB')
  t.equal(humanSize(3 * 1024 ** 4), '3.0 TiB')
})

t.test('sizes the way ls -h prints them (listings)', async t => {
  t.equal(compactSize(0), '0')
  t.equal(compactSize(1023), '1023')
  t.equal(compactSize(1024), '1.0K')
  t.equal(compactSize(1536), '1.5K')
  t.equal(compactSize(20 * 1024), '20K')
  t.equal(compactSize(5 * 1024 * 1024), '5.0M')
  t.equal(compactSize(3 * 1024 ** 3), '3.0G')
  t.equal(compactSize(2 * 1024 ** 5), '2.0P')
})
