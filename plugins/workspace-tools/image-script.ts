import { shellQuote } from './text.js'

/*
 * Image conversion for `view` (docs/contract.md#view) runs INSIDE the sandbox with the image's python3 +
 * Pillow: decoding untrusted images is the classic parser attack surface, and doing it in the chat's
 * own container keeps image parsers (and decompression bombs) out of the server process. The script is
 * a constant passed as `python3 -c SCRIPT path maxPixels maxSide`; the path travels as argv only.
 * stdout: the JPEG bytes; stderr, last line: JSON with the original and delivered dimensions, or
 * `{"error": …}` with exit status 3.
 */
export const IMAGE_SCRIPT = `
import sys, json, io, warnings
warnings.simplefilter('ignore')
def fail(kind, detail):
    sys.stderr.write('\\n' + json.dumps({'error': kind, 'detail': str(detail)[:300]}) + '\\n')
    sys.exit(3)
try:
    from PIL import Image
except Exception as e:
    fail('pillow', e)
Image.MAX_IMAGE_PIXELS = None
path, max_pixels, max_side = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
try:
    im = Image.open(path)
except Exception as e:
    fail('decode', e)
w, h = im.size
if w * h > max_pixels:
    fail('pixels', '%dx%d' % (w, h))
scale = min(1.0, float(max_side) / max(w, h))
tw, th = max(1, int(round(w * scale))), max(1, int(round(h * scale)))
try:
    im.seek(0)
    if im.format == 'JPEG' and scale < 1.0:
        im.draft('RGB', (tw, th))
    im.load()
    if 'A' in im.getbands() or 'transparency' in im.info:
        rgba = im.convert('RGBA')
        im = Image.new('RGB', rgba.size, (255, 255, 255))
        im.paste(rgba, mask=rgba.getchannel('A'))
    elif im.mode != 'RGB':
        im = im.convert('RGB')
    if im.size != (tw, th):
        im = im.resize((tw, th), Image.LANCZOS)
    out = io.BytesIO()
    im.save(out, 'JPEG', quality=80)
except Exception as e:
    fail('convert', e)
sys.stdout.buffer.write(out.getvalue())
sys.stdout.flush()
sys.stderr.write('\\n' + json.dumps({'width': w, 'height': h, 'outWidth': tw, 'outHeight': th}) + '\\n')
`

export const IMAGE_MAX_BYTES = 50 * 1024 * 1024
export const IMAGE_MAX_PIXELS = 100_000_000
export const IMAGE_MAX_SIDE = 1280

export interface ImageDims { width: number, height: number, outWidth: number, outHeight: number }

/** The script's report is one short JSON line (its error detail is cut to 300 characters). */
const MAX_REPORT_CHARS = 8192

/**
 * Reads the script's last stderr line. stderr comes from the sandbox (up to 16 MiB, and a module planted
 * in the working directory can write anything), so the line is found without splitting the whole text
 * and a line longer than any real report is not parsed at all (JSON.parse of deep nesting is slow).
 */
export function parseImageReport (stderr: string): ImageDims | { error: string, detail: string } | undefined {
  const trimmed = stderr.trimEnd()
  const line = trimmed.slice(trimmed.lastIndexOf('\n') + 1).trim()
  if (line === '' || line.length > MAX_REPORT_CHARS) return undefined
  try {
    const value = JSON.parse(line) as Record<string, unknown>
    if (typeof value.error === 'string') return { error: value.error, detail: typeof value.detail === 'string' ? value.detail : '' }
    const { width, height, outWidth, outHeight } = value
    if ([width, height, outWidth, outHeight].every(n => typeof n === 'number')) {
      return { width, height, outWidth, outHeight } as ImageDims
    }
  } catch {}
  return undefined
}

export const RESIZE_HINT = 'Make a smaller copy first, e.g. with bash: python3 -c "from PIL import Image; im = Image.open(\'in.png\'); ' +
  'im.thumbnail((2000, 2000)); im.save(\'small.png\')", then view the copy.'

/** The isError text for a failed conversion. */
export function imageErrorText (path: string, report: { error: string, detail: string } | undefined, size: number): string {
  if (report?.error === 'pixels') {
    return `Error: image ${path} is too large to view (${report.detail} pixels; the limit is 100 megapixels). ${RESIZE_HINT}`
  }
  if (report?.error === 'pillow') return `Error: cannot convert image ${path}: python3 with Pillow is not available in this sandbox`
  if (report?.error === 'decode') return `Error: cannot decode image ${path} (${size} bytes): ${report.detail}. Check the file with: file ${shellQuote(path)}`
  return `Error: cannot convert image ${path}: ${report?.detail ?? 'the converter failed'}`
}
