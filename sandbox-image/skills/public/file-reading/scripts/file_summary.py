#!/usr/bin/env python3
"""Identify a file and print a bounded summary of its content.

    file_summary.py FILE [--max-chars N] [--rows N] [--out TEXTFILE]

Kind is decided from the first bytes (magic), then `file`, then the extension; a
mismatch between the extension and the content is reported. The summary never
prints more than --max-chars characters of content (default 4000). --out writes
the complete extracted text (tables as tab-separated lines) to TEXTFILE so it can
be searched or paged with grep/sed instead of printed.
Exit codes: 0 ok, 2 bad arguments or unreadable file.
"""
import argparse
import csv
import io
import json
import os
import subprocess
import sys
import tarfile
import zipfile
from html.parser import HTMLParser

TEXT_SAMPLE = 1 << 20          # bytes read for text summaries
ZIP_LIST_MAX = 200             # archive members listed


def run(cmd, limit=8 << 20, timeout=60):
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, str(e)
    return p.stdout[:limit].decode('utf-8', 'replace'), p.stderr[:2000].decode('utf-8', 'replace')


def magic_kind(head, path):
    ext = os.path.splitext(path)[1].lower().lstrip('.')
    if head.startswith(b'%PDF-'):
        return 'pdf'
    if head.startswith(b'PK\x03\x04') or head.startswith(b'PK\x05\x06'):
        try:
            names = set(zipfile.ZipFile(path).namelist()[:5000])
        except zipfile.BadZipFile:
            return 'zip'
        if 'word/document.xml' in names:
            return 'docx'
        if 'xl/workbook.xml' in names:
            return 'xlsx'
        if 'ppt/presentation.xml' in names:
            return 'pptx'
        return 'zip'
    for sig, kind in ((b'\x89PNG', 'image'), (b'\xff\xd8\xff', 'image'), (b'GIF8', 'image'),
                      (b'BM', 'image'), (b'II*\x00', 'image'), (b'MM\x00*', 'image')):
        if head.startswith(sig):
            return 'image'
    if head[:4] == b'RIFF' and head[8:12] == b'WEBP':
        return 'image'
    if head.startswith(b'\x1f\x8b') or head.startswith(b'BZh') or head.startswith(b'\xfd7zXZ') or head[257:262] == b'ustar':
        return 'tar' if ext in ('tgz', 'tar', 'gz', 'bz2', 'xz', 'tbz2', 'txz') or head[257:262] == b'ustar' else 'binary'
    if b'\x00' in head[:4096] and not head.startswith((b'\xff\xfe', b'\xfe\xff')):
        return 'binary'
    low = head[:2048].lstrip().lower()
    if ext in ('html', 'htm', 'xhtml') or low.startswith(b'<!doctype html') or low.startswith(b'<html'):
        return 'html'
    if ext in ('csv', 'tsv'):
        return 'csv'
    if ext in ('json', 'geojson', 'ipynb') or (low[:1] in (b'{', b'[') and ext in ('', 'txt')):
        return 'json'
    if ext == 'jsonl' or ext == 'ndjson':
        return 'jsonl'
    if ext in ('svg',):
        return 'text'
    return 'text'


def decode(data, truncated=False):
    """Text and the name of its encoding: BOMs first, then UTF-8, else Latin-1."""
    if data.startswith(b'\xef\xbb\xbf'):
        return data[3:].decode('utf-8', 'replace'), 'utf-8 (BOM)'
    if data.startswith((b'\xff\xfe', b'\xfe\xff')):
        return data.decode('utf-16', 'replace'), 'utf-16'
    try:
        return data.decode('utf-8'), 'utf-8'
    except UnicodeDecodeError as e:
        if truncated and e.start > len(data) - 4:     # a character cut at the end of the sample
            return data[:e.start].decode('utf-8'), 'utf-8'
    return data.decode('latin-1'), 'latin-1 (not valid UTF-8)'


def read_text(path):
    with open(path, 'rb') as f:
        data = f.read(TEXT_SAMPLE)
        more = f.read(1) != b''
    text, enc = decode(data, more)
    return text, enc, more


def copy_text(src, dst):
    """Copies a large text file as UTF-8, decoding it the way the summary did."""
    with open(src, 'rb') as f:
        _, enc = decode(f.read(4096))
    codec = {'utf-8 (BOM)': 'utf-8-sig', 'utf-16': 'utf-16', 'utf-8': 'utf-8'}.get(enc, 'latin-1')
    n = 0
    with open(src, encoding=codec, errors='replace', newline='') as f, open(dst, 'w', encoding='utf-8', newline='') as o:
        for chunk in iter(lambda: f.read(1 << 20), ''):
            o.write(chunk)
            n += len(chunk)
    return n


def count_lines(path):
    n = 0
    with open(path, 'rb') as f:
        for chunk in iter(lambda: f.read(1 << 20), b''):
            n += chunk.count(b'\n')
    return n


def summarize_text(path, a):
    text, enc, more = read_text(path)
    out = [f'encoding: {enc}', f'lines: {count_lines(path)}']
    return out, text, text if not more else None


def summarize_csv(path, a):
    text, enc, more = read_text(path)
    sample = text[:64 * 1024]
    try:
        dialect = csv.Sniffer().sniff(sample, delimiters=',;\t|')
        delim = dialect.delimiter
    except csv.Error:
        delim = '\t' if path.lower().endswith('.tsv') else ','
    rows = list(csv.reader(io.StringIO(text), delimiter=delim))
    if more and rows:
        rows = rows[:-1]        # the last row of a cut sample may be partial
    total = count_lines(path)
    cols = max((len(r) for r in rows), default=0)
    head = ['\t'.join(r) for r in rows[:a.rows]]
    out = [f'encoding: {enc}', f'delimiter: {delim!r}', f'rows: about {total} (lines)', f'columns: {cols}']
    if rows:
        out.append('header: ' + ' | '.join(rows[0]))
    return out, '\n'.join(head), '\n'.join('\t'.join(r) for r in rows) if not more else None


def shape(v, depth=0):
    if isinstance(v, dict):
        keys = list(v)[:20]
        inner = ', '.join(f'{k}: {shape(v[k], depth + 1)}' for k in keys) if depth < 2 else '...'
        return '{' + inner + (', ...' if len(v) > 20 else '') + '}'
    if isinstance(v, list):
        return f'[{len(v)} x {shape(v[0], depth + 1)}]' if v else '[]'
    return type(v).__name__


def summarize_json(path, a):
    if os.path.getsize(path) > 64 << 20:
        return summarize_text(path, a)
    with open(path, 'rb') as f:
        text, enc = decode(f.read())
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        return [f'encoding: {enc}', f'not valid JSON: {e}'], text, text
    pretty = json.dumps(data, indent=2, ensure_ascii=False)
    return [f'encoding: {enc}', f'top level: {type(data).__name__}', f'shape: {shape(data)}'], pretty, pretty


def summarize_xlsx(path, a):
    from openpyxl import load_workbook
    wb = load_workbook(path, read_only=True, data_only=True)
    out, shown, full = [f'sheets: {len(wb.worksheets)}'], [], []
    for ws in wb.worksheets:
        out.append(f'sheet {ws.title!r}: {ws.max_row} rows x {ws.max_column} columns')
        shown.append(f'## sheet {ws.title}')
        full.append(f'## sheet {ws.title}')
        for i, row in enumerate(ws.iter_rows(values_only=True)):
            line = '\t'.join('' if v is None else str(v) for v in row)
            if i < a.rows:
                shown.append(line)
            if a.out:
                full.append(line)
            elif i >= a.rows:
                break
    wb.close()
    return out, '\n'.join(shown), '\n'.join(full)


def summarize_docx(path, a):
    import docx
    d = docx.Document(path)
    lines = []
    for p in d.paragraphs:
        if not p.text.strip():
            continue
        style = p.style.name if p.style is not None else ''
        lines.append(('#' * int(style[-1]) + ' ' if style.startswith('Heading') and style[-1:].isdigit() else '# ' if style == 'Title' else '') + p.text)
    for n, t in enumerate(d.tables, 1):
        lines.append(f'## table {n}')
        lines.extend('\t'.join(c.text for c in row.cells) for row in t.rows)
    words = sum(len(p.text.split()) for p in d.paragraphs)
    text = '\n'.join(lines)
    return [f'paragraphs: {len(d.paragraphs)}', f'tables: {len(d.tables)}', f'words: {words}'], text, text


def summarize_pptx(path, a):
    import re
    z = zipfile.ZipFile(path)
    slides = sorted((n for n in z.namelist() if re.fullmatch(r'ppt/slides/slide\d+\.xml', n)), key=lambda n: int(re.search(r'\d+', n).group()))
    lines = []
    for i, name in enumerate(slides, 1):
        xml = z.read(name).decode('utf-8', 'replace')
        lines.append(f'--- slide {i}')
        for para in xml.split('</a:p>'):
            t = ''.join(re.findall(r'<a:t>([^<]*)</a:t>', para))
            if t:
                lines.append(t.replace('&lt;', '<').replace('&gt;', '>').replace('&quot;', '"').replace('&apos;', "'").replace('&amp;', '&'))
    text = '\n'.join(lines)
    return [f'slides: {len(slides)}'], text, text


def summarize_pdf(path, a):
    info, err = run(['pdfinfo', path])
    meta = [l for l in (info or '').splitlines() if l.split(':')[0] in ('Title', 'Author', 'Pages', 'Page size', 'Encrypted', 'Producer')]
    last = [] if a.out else ['-l', '5']
    text, err2 = run(['pdftotext', '-layout', *last, path, '-'])
    if text is None:
        return meta + [f'pdftotext failed: {err2}'], '', None
    out = meta + ([] if a.out else ['text below: pages 1-5 only (use --out for all pages)'])
    if len(text.strip()) < 20:
        out.append('almost no text layer: the pages are probably scanned images - see /mnt/skills/public/pdf-reading/SKILL.md (OCR, page images)')
    return out, text, text


class _HTMLText(HTMLParser):
    SKIP = {'script', 'style', 'noscript', 'template', 'svg'}
    BLOCK = {'p', 'div', 'br', 'li', 'tr', 'h1', 'h2', 'h3', 'h4', 'h5', 'h6', 'section', 'article', 'table', 'ul', 'ol', 'header', 'footer', 'title'}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.parts, self.skip, self.title, self.in_title, self.links = [], 0, '', False, 0

    def handle_starttag(self, tag, attrs):
        if tag in self.SKIP:
            self.skip += 1
        if tag == 'title':
            self.in_title = True
        if tag == 'a':
            self.links += 1
        if tag in self.BLOCK:
            self.parts.append('\n')
        if tag in ('td', 'th'):
            self.parts.append('\t')

    def handle_endtag(self, tag):
        if tag in self.SKIP and self.skip:
            self.skip -= 1
        if tag == 'title':
            self.in_title = False
        if tag in self.BLOCK:
            self.parts.append('\n')

    def handle_data(self, data):
        if self.in_title:
            self.title += data
        elif not self.skip:
            self.parts.append(data)


def summarize_html(path, a):
    raw, enc, _ = read_text(path)
    p = _HTMLText()
    p.feed(raw)
    lines = [' '.join(l.split()) for l in ''.join(p.parts).splitlines()]
    text = '\n'.join(l for l in lines if l)
    return [f'encoding: {enc}', f'title: {" ".join(p.title.split())}', f'links: {p.links}'], text, text


def summarize_zip(path, a):
    z = zipfile.ZipFile(path)
    infos = z.infolist()
    total = sum(i.file_size for i in infos)
    lines = [f'{i.file_size:>12}  {i.filename}' for i in infos[:ZIP_LIST_MAX]]
    if len(infos) > ZIP_LIST_MAX:
        lines.append(f'... {len(infos) - ZIP_LIST_MAX} more entries')
    unsafe = [i.filename for i in infos if i.filename.startswith('/') or '..' in i.filename.split('/')]
    out = [f'entries: {len(infos)}', f'uncompressed bytes: {total}']
    if unsafe:
        out.append(f'WARNING unsafe paths (absolute or ..), do not extract blindly: {unsafe[:5]}')
    out.append('extract with: mkdir -p ~/x && unzip -q FILE -d ~/x   (then run this script on the members)')
    return out, '\n'.join(lines), None


def summarize_tar(path, a):
    lines, n, total = [], 0, 0
    with tarfile.open(path) as t:
        for m in t:
            n += 1
            total += m.size
            if n <= ZIP_LIST_MAX:
                lines.append(f'{m.size:>12}  {m.name}{" -> " + m.linkname if m.issym() or m.islnk() else ""}')
    if n > ZIP_LIST_MAX:
        lines.append(f'... {n - ZIP_LIST_MAX} more entries')
    return [f'entries: {n}', f'bytes: {total}', 'extract with: mkdir -p ~/x && tar -xf FILE -C ~/x'], '\n'.join(lines), None


def summarize_image(path, a):
    from PIL import Image
    with Image.open(path) as im:
        out = [f'format: {im.format}', f'size: {im.width} x {im.height} px', f'mode: {im.mode}', f'frames: {getattr(im, "n_frames", 1)}']
    out.append('look at it with the view tool; crop/zoom: /mnt/skills/public/describe-image/SKILL.md')
    return out, '', None


def summarize_binary(path, a):
    with open(path, 'rb') as f:
        head = f.read(256)
    hexd = '\n'.join(f'{i:08x}  {head[i:i + 16].hex(" ")}' for i in range(0, len(head), 16))
    strings, _ = run(['sh', '-c', 'strings -n 6 "$1" | head -40', 'sh', path])
    return ['no text extractor for this kind; first bytes and printable strings below'], hexd + '\n' + (strings or ''), None


KINDS = {'text': summarize_text, 'csv': summarize_csv, 'json': summarize_json, 'jsonl': summarize_text,
         'xlsx': summarize_xlsx, 'docx': summarize_docx, 'pptx': summarize_pptx, 'pdf': summarize_pdf,
         'html': summarize_html, 'zip': summarize_zip, 'tar': summarize_tar, 'image': summarize_image,
         'binary': summarize_binary}
EXPECTED_EXT = {'pdf': {'pdf'}, 'docx': {'docx', 'docm'}, 'xlsx': {'xlsx', 'xlsm'}, 'pptx': {'pptx'},
                'image': {'png', 'jpg', 'jpeg', 'gif', 'bmp', 'tif', 'tiff', 'webp'}}


def main():
    ap = argparse.ArgumentParser(description='Identify a file and print a bounded summary of its content.')
    ap.add_argument('file')
    ap.add_argument('--max-chars', type=int, default=4000, help='content characters printed (default 4000)')
    ap.add_argument('--rows', type=int, default=10, help='table rows shown per sheet/CSV (default 10)')
    ap.add_argument('--out', help='write the complete extracted text to this file')
    a = ap.parse_args()
    path = a.file
    if not os.path.isfile(path):
        print(f'file_summary: {path}: not a regular file', file=sys.stderr)
        return 2
    try:
        with open(path, 'rb') as f:
            head = f.read(4096)
    except OSError as e:
        print(f'file_summary: cannot read {path}: {e.strerror}', file=sys.stderr)
        return 2
    desc, _ = run(['file', '--brief', path])
    mime, _ = run(['file', '--brief', '--mime', path])
    kind = magic_kind(head, path)
    ext = os.path.splitext(path)[1].lower().lstrip('.')
    print(f'file: {path}')
    print(f'size: {os.path.getsize(path)} bytes')
    print(f'type: {(desc or "?").strip()} [{(mime or "?").strip()}]')
    print(f'kind: {kind}')
    if kind in EXPECTED_EXT and ext and ext not in EXPECTED_EXT[kind]:
        print(f'NOTE: the extension .{ext} does not match the content ({kind})')
    try:
        facts, shown, full = KINDS[kind](path, a)
    except Exception as e:  # a damaged file: say so, still show the first bytes
        print(f'could not read it as {kind}: {type(e).__name__}: {e}')
        facts, shown, full = summarize_binary(path, a)
    for line in facts:
        print(line)
    if shown:
        cut = shown[:a.max_chars]
        print(f'--- content ({len(shown)} chars{", first " + str(a.max_chars) + " shown" if len(shown) > a.max_chars else ""})')
        print(cut)
        if len(shown) > a.max_chars:
            print(f'--- [cut: {len(shown) - a.max_chars} more chars; use --out FILE and page through it]')
    if a.out:
        if full is None and kind in ('text', 'csv', 'jsonl', 'json'):
            n = copy_text(path, a.out)
        else:
            full = shown if full is None else full
            with open(a.out, 'w', encoding='utf-8') as f:
                f.write(full)
            n = len(full)
        print(f'--- full text: {n} chars written to {a.out}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
