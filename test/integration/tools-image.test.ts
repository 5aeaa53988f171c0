import t from 'tap'
import type { CallToolResult, ImageContent } from '@modelcontextprotocol/sdk/types.js'
import { dockerOrSkip } from './docker.js'
import { bash, client, textOf, toolsApp } from '../plugins/workspace-tools/integration-app.js'

const gate = await dockerOrSkip()

/** Width and height from a JPEG's SOF marker. */
function jpegSize (b: Buffer): { width: number, height: number } {
  if (b[0] !== 0xff || b[1] !== 0xd8) throw new Error('not a JPEG')
  let i = 2
  while (i + 9 < b.length) {
    if (b[i] !== 0xff) throw new Error(`bad marker at ${i}`)
    const marker = b[i + 1] as number
    const len = b.readUInt16BE(i + 2)
    if (marker >= 0xc0 && marker <= 0xc3) return { height: b.readUInt16BE(i + 5), width: b.readUInt16BE(i + 7) }
    i += 2 + len
  }
  throw new Error('no SOF marker')
}

const PY = (code: string): string => `python3 -c "${code}"`

t.test('view converts images inside the sandbox to JPEG image blocks', gate, async t => {
  const { url } = await toolsApp(t)
  const c = await client(t, url, 'wt-image')
  const view = async (path: string): Promise<CallToolResult> =>
    await c.callTool({ name: 'view', arguments: { description: 'look', path } }) as CallToolResult
  const image = (r: CallToolResult): ImageContent => r.content[1] as ImageContent
  /** Sends a delivered JPEG back into the sandbox and reads its size, mode and one pixel with Pillow. */
  const inspect = async (img: ImageContent, x: number, y: number): Promise<string> => {
    await c.callTool({ name: 'create_file', arguments: { description: 'b64', path: '/tmp/back.b64', file_text: img.data } })
    return textOf(await bash(c, `base64 -d /tmp/back.b64 > /tmp/back.jpg && ${PY(`from PIL import Image; im = Image.open('/tmp/back.jpg'); print(im.format, im.size, im.mode, im.getpixel((${x}, ${y})))`)}`))
  }

  t.test('a 3000x1000 transparent PNG becomes a 1280x427 JPEG flattened on white', async t => {
    await bash(c, PY("from PIL import Image; im = Image.new('RGBA', (3000, 1000), (0, 0, 0, 0)); im.paste((255, 0, 0, 255), (1500, 0, 3000, 1000)); im.save('wide.png')"))
    const r = await view('wide.png')
    t.notOk(r.isError)
    t.equal(r.content.length, 2)
    t.equal(textOf(r), 'Image: /home/assistant/wide.png (original 3000x1000 px, delivered as 1280x427 px JPEG)')
    t.equal(image(r).type, 'image')
    t.equal(image(r).mimeType, 'image/jpeg')
    t.same(jpegSize(Buffer.from(image(r).data, 'base64')), { width: 1280, height: 427 })
    const seen = await inspect(image(r), 10, 10)
    t.match(seen, /^JPEG \(1280, 427\) RGB \((25[0-5]), (25[0-5]), (25[0-5])\)\n$/, 'transparent area is white')
    t.match(await inspect(image(r), 1200, 200), /\((2[4-5]\d), ([0-9]|1\d), ([0-9]|1\d)\)\n$/, 'opaque area stays red')
  })

  t.test('a 100x100 image is never upscaled', async t => {
    await bash(c, PY("from PIL import Image; Image.new('RGB', (100, 100), (0, 128, 255)).save('small.jpg')"))
    const r = await view('small.jpg')
    t.equal(textOf(r), 'Image: /home/assistant/small.jpg (original 100x100 px, delivered as 100x100 px JPEG)')
    t.same(jpegSize(Buffer.from(image(r).data, 'base64')), { width: 100, height: 100 })
  })

  t.test('an image under outputs also gives its public URL; an extensionless PNG is found by its magic number', async t => {
    await bash(c, PY("from PIL import Image; im = Image.new('L', (640, 2000), 128); im.save('/mnt/user-data/outputs/tall chart.png'); im.save('noext', 'PNG')"))
    const r = await view('/mnt/user-data/outputs/tall chart.png')
    t.equal(textOf(r), 'Image: /mnt/user-data/outputs/tall chart.png (original 640x2000 px, delivered as 410x1280 px JPEG)\n' +
      'Public URL: http://cubicle.test/files/wt-image/tall%20chart.png')
    const magic = await view('noext')
    t.equal(image(magic).mimeType, 'image/jpeg')
    t.match(textOf(magic), /original 640x2000 px/)
  })

  t.test('an animated GIF shows its first frame', async t => {
    await bash(c, PY("from PIL import Image; a = Image.new('RGB', (50, 50), (255, 0, 0)); b = Image.new('RGB', (50, 50), (0, 0, 255)); a.save('anim.gif', save_all=True, append_images=[b], duration=100, loop=0)"))
    const r = await view('anim.gif')
    t.match(await inspect(image(r), 25, 25), /\((2[3-5]\d), ([0-9]|[12]\d), ([0-9]|[12]\d)\)\n$/, 'red, not blue')
  })

  t.test('a corrupt image and one above 100 megapixels are errors with guidance', async t => {
    await bash(c, 'echo "not really a png" > broken.png')
    const broken = await view('broken.png')
    t.equal(broken.isError, true)
    t.match(textOf(broken), /^Error: cannot decode image \/home\/assistant\/broken\.png \(17 bytes\)/)
    await bash(c, PY("from PIL import Image; Image.new('1', (20000, 5001)).save('giant.png')"))
    const giant = await view('giant.png')
    t.equal(giant.isError, true)
    t.match(textOf(giant), /^Error: image \/home\/assistant\/giant\.png is too large to view \(20000x5001 pixels; the limit is 100 megapixels\)\. Make a smaller copy first/)
  })
})
