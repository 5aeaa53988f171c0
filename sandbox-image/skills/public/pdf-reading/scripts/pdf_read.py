#!/usr/bin/env python3
"""Read PDFs page by page: what is in them, their text, their tables, page images, OCR.

    pdf_read.py probe  FILE                        pages, text per page, which pages are scans, OCR available?
    pdf_read.py text   FILE [--pages 1-5] [--out F]   text layer (pdftotext -layout; pypdf when poppler fails)
    pdf_read.py tables FILE [--pages 1-5] [--out F.csv] tables from column-aligned text, as CSV
    pdf_read.py pages  FILE [--pages 1-2] [--dpi 100] [--dir D]   PNG per page, to look at with `view`
    pdf_read.py ocr    FILE [--pages 1-2] [--lang eng] [--out F]  OCR of scanned pages (tesseract, full image)

Exit codes: 0 ok, 2 bad arguments or unreadable PDF, 3 the tool needed is not in this image.
"""
import argparse
import csv
import os
import re
import shutil
import subprocess
import sys
import tempfile

SCAN_CHARS = 25          # fewer text characters than this on a page: treat it as a scanned image
MAX_PAGES_RENDER = 20    # pages rendered or OCRed per call


def fail(msg, code=2):
    print(f'pdf_read: {msg}', file=sys.stderr)
    sys.exit(code)


def run(cmd, timeout=120):
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
    except subprocess.TimeoutExpired:
        fail(f'{cmd[0]} took longer than {timeout} s')
    except OSError as e:
        fail(f'{cmd[0]}: {e.strerror}', 3)
    return p.returncode, p.stdout.decode('utf-8', 'replace'), p.stderr.decode('utf-8', 'replace')


def page_count(path):
    rc, out, err = run(['pdfinfo', path])
    m = re.search(r'^Pages:\s+(\d+)', out, re.M)
    if rc == 0 and m:
        return int(m.group(1))
    try:
        import pypdf
        return len(pypdf.PdfReader(path).pages)
    except Exception as e:  # noqa: BLE001 - any parser error means: not a readable PDF
        fail(f'{path} is not a readable PDF ({err.strip() or e})')


def page_range(spec, total, cap=None):
    if not spec:
        first, last = 1, total
    else:
        m = re.fullmatch(r'(\d+)(?:-(\d+))?', spec)
        if not m:
            fail(f'--pages must look like 3 or 2-5, got {spec!r}')
        first = int(m.group(1))
        last = int(m.group(2) or first)
    if first < 1 or first > last or first > total:
        fail(f'pages {spec} outside 1-{total}')
    last = min(last, total)
    if cap and last - first + 1 > cap:
        print(f'(only pages {first}-{first + cap - 1} of the requested range; ask again for the rest)', file=sys.stderr)
        last = first + cap - 1
    return first, last


def page_texts(path, first, last):
    rc, out, err = run(['pdftotext', '-layout', '-f', str(first), '-l', str(last), path, '-'])
    if rc == 0:
        return out.split('\f')[:last - first + 1]
    import pypdf
    reader = pypdf.PdfReader(path)
    return [(reader.pages[i].extract_text() or '') for i in range(first - 1, last)]


def tesseract_langs():
    if not shutil.which('tesseract'):
        return None
    rc, out, err = run(['tesseract', '--list-langs'])
    return [l.strip() for l in (out + err).splitlines()[1:] if l.strip() and ' ' not in l.strip()]


def cmd_probe(a):
    total = page_count(a.file)
    rc, info, _ = run(['pdfinfo', a.file])
    for line in info.splitlines():
        if line.split(':')[0] in ('Title', 'Author', 'Creator', 'Producer', 'Pages', 'Page size', 'Encrypted'):
            print(line)
    first, last = 1, min(total, 200)
    texts = page_texts(a.file, first, last)
    scans = [first + i for i, t in enumerate(texts) if len(t.strip()) < SCAN_CHARS]
    print(f'text characters per page (first {last}): ' + ', '.join(f'{first + i}:{len(t.strip())}' for i, t in enumerate(texts[:60])) + (' ...' if len(texts) > 60 else ''))
    if not scans:
        print('text layer: every page has text -> use `text` and `tables`')
    elif len(scans) == len(texts):
        print('text layer: none -> scanned pages; use `pages` + view, or `ocr`')
    else:
        print(f'text layer: missing on pages {compact(scans)} -> those are scans; use `pages` + view, or `ocr` for them')
    langs = tesseract_langs()
    print('OCR: ' + (f'available (tesseract, languages: {" ".join(langs) or "none"})' if langs is not None else 'not in this image (tesseract is only in the full image); render pages and read them with view'))


def compact(pages):
    out, start, prev = [], None, None
    for p in pages + [None]:
        if start is None:
            start = prev = p
        elif p == prev + 1:
            prev = p
        else:
            out.append(f'{start}' if start == prev else f'{start}-{prev}')
            start = prev = p
    return ','.join(out)


def emit(text, out):
    if out:
        with open(out, 'w', encoding='utf-8') as f:
            f.write(text)
        print(f'wrote {out} ({len(text)} characters)')
    else:
        sys.stdout.write(text)


def cmd_text(a):
    first, last = page_range(a.pages, page_count(a.file))
    texts = page_texts(a.file, first, last)
    emit(''.join(f'=== page {first + i}\n{t.rstrip()}\n' for i, t in enumerate(texts)), a.out)


def split_row(line):
    """Cells of one layout line: runs of 2+ spaces separate columns."""
    return [c for c in re.split(r' {2,}', line.strip()) if c]


def find_tables(text):
    """Blocks of 2+ consecutive lines with the same number (>= 2) of cells."""
    tables, block = [], []
    for line in text.splitlines() + ['']:
        cells = split_row(line)
        if len(cells) >= 2 and (not block or len(cells) == len(block[0])):
            block.append(cells)
            continue
        if len(block) >= 2:
            tables.append(block)
        block = [cells] if len(cells) >= 2 else []
    return tables


def cmd_tables(a):
    first, last = page_range(a.pages, page_count(a.file))
    found = []
    for i, t in enumerate(page_texts(a.file, first, last)):
        found += [(first + i, rows) for rows in find_tables(t)]
    if not found:
        print('no column-aligned tables found (scanned page? look at it with `pages` and view)')
        return
    if a.out:
        with open(a.out, 'w', newline='', encoding='utf-8') as f:
            w = csv.writer(f, lineterminator='\n')
            for n, (page, rows) in enumerate(found, 1):
                w.writerow([f'# table {n} (page {page})'])
                w.writerows(rows)
        print(f'wrote {a.out} ({len(found)} tables)')
    w = csv.writer(sys.stdout, lineterminator='\n')
    for n, (page, rows) in enumerate(found, 1):
        print(f'# table {n} (page {page}, {len(rows)} rows x {len(rows[0])} columns)')
        w.writerows(rows[:a.rows])
        if len(rows) > a.rows:
            print(f'# ... {len(rows) - a.rows} more rows' + (f' in {a.out}' if a.out else ' (use --out)'))


def render(path, first, last, dpi, directory):
    os.makedirs(directory, exist_ok=True)
    prefix = os.path.join(directory, 'page')
    rc, _, err = run(['pdftoppm', '-png', '-r', str(dpi), '-f', str(first), '-l', str(last), path, prefix], timeout=300)
    if rc != 0:
        fail(f'pdftoppm failed: {err.strip()}')
    pngs = sorted(f for f in os.listdir(directory) if re.fullmatch(r'page-0*\d+\.png', f))
    wanted = set(range(first, last + 1))
    return [os.path.join(directory, f) for f in pngs if int(re.search(r'(\d+)\.png$', f).group(1)) in wanted]


def cmd_pages(a):
    first, last = page_range(a.pages or '1', page_count(a.file), MAX_PAGES_RENDER)
    for png in render(a.file, first, last, a.dpi, a.dir):
        print(png)
    print('look at each image with the view tool')


def cmd_ocr(a):
    langs = tesseract_langs()
    if langs is None:
        fail('OCR needs tesseract, which is only in the full image. Render the pages instead '
             '(pdf_read.py pages FILE --pages N) and read them with the view tool.', 3)
    for lang in a.lang.split('+'):
        if lang not in langs:
            fail(f'tesseract has no {lang!r} data here (installed: {" ".join(langs)})', 3)
    first, last = page_range(a.pages or '1', page_count(a.file), MAX_PAGES_RENDER)
    parts = []
    with tempfile.TemporaryDirectory() as tmp:
        for png in render(a.file, first, last, 300, tmp):
            rc, out, err = run(['tesseract', png, '-', '-l', a.lang], timeout=300)
            if rc != 0:
                fail(f'tesseract failed on {os.path.basename(png)}: {err.strip()}')
            page = int(re.search(r'(\d+)\.png$', png).group(1))
            parts.append(f'=== page {page} (OCR)\n{out.rstrip()}\n')
    emit(''.join(parts), a.out)


def main():
    ap = argparse.ArgumentParser(description='Read PDFs page by page.')
    sub = ap.add_subparsers(dest='cmd', required=True)
    for name in ('probe', 'text', 'tables', 'pages', 'ocr'):
        p = sub.add_parser(name)
        p.add_argument('file')
        if name != 'probe':
            p.add_argument('--pages', help='one page (3) or a range (2-5)')
        if name in ('text', 'tables', 'ocr'):
            p.add_argument('--out', help='write the result to this file')
        if name == 'tables':
            p.add_argument('--rows', type=int, default=15, help='rows printed per table (default 15)')
        if name == 'pages':
            p.add_argument('--dpi', type=int, default=100, help='resolution (default 100; 150-200 for small print)')
            p.add_argument('--dir', default='/tmp/pdf-pages', help='where the PNGs go (default /tmp/pdf-pages)')
        if name == 'ocr':
            p.add_argument('--lang', default='eng', help='tesseract language(s), e.g. eng or eng+deu')
    a = ap.parse_args()
    if not os.path.isfile(a.file):
        fail(f'{a.file}: no such file')
    if getattr(a, 'dpi', 100) not in range(30, 401):
        fail('--dpi must be between 30 and 400')
    globals()['cmd_' + a.cmd](a)


if __name__ == '__main__':
    main()
