#!/usr/bin/env python3
"""Prepare images for the view tool: facts, crops, zoom, a coordinate grid, tiles.

    image_tool.py info  IMG
    image_tool.py crop  IMG --box X0,Y0,X1,Y1 [--zoom 2] -o OUT.png   pixel box, or fractions 0-1 (0.5,0,1,0.5)
    image_tool.py zoom  IMG --factor 2 -o OUT.png                     whole image scaled
    image_tool.py grid  IMG [--step 100] -o OUT.png                   labelled lines every STEP pixels
    image_tool.py tiles IMG [--rows 2] [--cols 2] [--dir DIR]         overlapping tiles for detail

Outputs are PNG (JPEG when OUT ends in .jpg). Images are turned upright by their EXIF
orientation first, so coordinates match what view shows. No output side exceeds 4096 px.
Exit codes: 0 ok, 2 bad arguments or unreadable image.
"""
import argparse
import os
import sys

from PIL import Image, ImageDraw, ImageFont, ImageOps

MAX_SIDE = 4096
Image.MAX_IMAGE_PIXELS = 200_000_000   # refuse decompression bombs above this


def fail(msg):
    print(f'image_tool: {msg}', file=sys.stderr)
    sys.exit(2)


def load(path):
    try:
        im = Image.open(path)
        im.load()
    except FileNotFoundError:
        fail(f'{path}: no such file')
    except (OSError, Image.DecompressionBombError) as e:
        fail(f'{path}: not a readable image ({e})')
    return ImageOps.exif_transpose(im)


def save(im, out):
    d = os.path.dirname(out)
    if d:
        os.makedirs(d, exist_ok=True)
    if out.lower().endswith(('.jpg', '.jpeg')):
        im = im.convert('RGB')
    elif im.mode not in ('RGB', 'RGBA', 'L', 'LA', 'P'):
        im = im.convert('RGBA')
    im.save(out)
    print(f'wrote {out} ({im.width}x{im.height})')


def scaled(im, factor):
    w, h = round(im.width * factor), round(im.height * factor)
    if w < 1 or h < 1:
        fail('the result would be empty')
    if max(w, h) > MAX_SIDE:
        fail(f'the result would be {w}x{h}; at most {MAX_SIDE} px per side - use a smaller box or factor')
    return im.resize((w, h), Image.LANCZOS if factor < 1 or im.mode not in ('P', '1') else Image.NEAREST)


def parse_box(spec, im):
    try:
        vals = [float(v) for v in spec.split(',')]
    except ValueError:
        vals = []
    if len(vals) != 4:
        fail(f'--box needs four numbers X0,Y0,X1,Y1, got {spec!r}')
    if all(0 <= v <= 1 for v in vals) and any(v != int(v) for v in vals) or vals == [0, 0, 1, 1]:
        vals = [vals[0] * im.width, vals[1] * im.height, vals[2] * im.width, vals[3] * im.height]
    x0, y0, x1, y1 = (round(v) for v in vals)
    if not (0 <= x0 < x1 <= im.width and 0 <= y0 < y1 <= im.height):
        fail(f'box {x0},{y0},{x1},{y1} is not inside the image (0,0,{im.width},{im.height}) or is empty')
    return x0, y0, x1, y1


def cmd_info(a):
    im = load(a.image)
    with Image.open(a.image) as raw:
        print(f'format: {raw.format}')
        print(f'size as stored: {raw.width}x{raw.height}')
        print(f'mode: {raw.mode}')
        print(f'frames: {getattr(raw, "n_frames", 1)}')
        dpi = raw.info.get('dpi')
        if dpi:
            print(f'dpi: {round(float(dpi[0]))}x{round(float(dpi[1]))}')
        orient = raw.getexif().get(0x0112)
    print(f'size upright: {im.width}x{im.height}' + (f' (EXIF orientation {orient})' if orient and orient != 1 else ''))


def cmd_crop(a):
    im = load(a.image)
    box = parse_box(a.box, im)
    save(scaled(im.crop(box), a.zoom), a.out)


def cmd_zoom(a):
    save(scaled(load(a.image), a.factor), a.out)


def cmd_grid(a):
    im = load(a.image).convert('RGB')
    if a.step < 10:
        fail('--step must be at least 10')
    draw = ImageDraw.Draw(im, 'RGBA')
    try:
        font = ImageFont.truetype('/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf', max(10, min(24, a.step // 5)))
    except OSError:
        font = ImageFont.load_default()
    for x in range(0, im.width, a.step):
        draw.line([(x, 0), (x, im.height)], fill=(255, 0, 0, 140), width=1)
        draw.text((x + 2, 2), str(x), fill=(255, 0, 0, 255), font=font, stroke_width=2, stroke_fill=(255, 255, 255, 255))
    for y in range(0, im.height, a.step):
        draw.line([(0, y), (im.width, y)], fill=(0, 0, 255, 140), width=1)
        draw.text((2, y + 2), str(y), fill=(0, 0, 255, 255), font=font, stroke_width=2, stroke_fill=(255, 255, 255, 255))
    save(im, a.out)


def cmd_tiles(a):
    im = load(a.image)
    if not (1 <= a.rows <= 8 and 1 <= a.cols <= 8):
        fail('--rows and --cols must be 1 to 8')
    tw, th = im.width / a.cols, im.height / a.rows
    pad_x, pad_y = round(tw * 0.1), round(th * 0.1)     # 10 % overlap so nothing is cut in half
    for r in range(a.rows):
        for c in range(a.cols):
            box = (max(0, round(c * tw) - pad_x), max(0, round(r * th) - pad_y),
                   min(im.width, round((c + 1) * tw) + pad_x), min(im.height, round((r + 1) * th) + pad_y))
            tile = im.crop(box)
            factor = min(a.zoom, MAX_SIDE / max(tile.size))
            out = os.path.join(a.dir, f'tile-r{r + 1}-c{c + 1}.png')
            save(scaled(tile, factor) if factor != 1 else tile, out)
            print(f'  box {box[0]},{box[1]},{box[2]},{box[3]}')


def main():
    ap = argparse.ArgumentParser(description='Prepare images for the view tool.')
    sub = ap.add_subparsers(dest='cmd', required=True)
    p = sub.add_parser('info')
    p.add_argument('image')
    p = sub.add_parser('crop')
    p.add_argument('image')
    p.add_argument('--box', required=True)
    p.add_argument('--zoom', type=float, default=1.0)
    p.add_argument('-o', '--out', required=True)
    p = sub.add_parser('zoom')
    p.add_argument('image')
    p.add_argument('--factor', type=float, required=True)
    p.add_argument('-o', '--out', required=True)
    p = sub.add_parser('grid')
    p.add_argument('image')
    p.add_argument('--step', type=int, default=100)
    p.add_argument('-o', '--out', required=True)
    p = sub.add_parser('tiles')
    p.add_argument('image')
    p.add_argument('--rows', type=int, default=2)
    p.add_argument('--cols', type=int, default=2)
    p.add_argument('--zoom', type=float, default=1.0)
    p.add_argument('--dir', default='/tmp/tiles')
    a = ap.parse_args()
    for name in ('zoom', 'factor'):
        v = getattr(a, name, None)
        if v is not None and not 0.05 <= v <= 16:
            fail(f'--{name} must be between 0.05 and 16')
    globals()['cmd_' + a.cmd](a)


if __name__ == '__main__':
    main()
