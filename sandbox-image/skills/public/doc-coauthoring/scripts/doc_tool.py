#!/usr/bin/env python3
"""Helpers for writing a Markdown document together with the user.

    doc_tool.py outline  DRAFT.md                   heading tree, words per section, open notes
    doc_tool.py snapshot DRAFT.md [--note TEXT]     save the draft as versions/<name>-vN.md, show what changed
    doc_tool.py diff     DRAFT.md [--from N] [--to M]  unified diff between versions (default: last version -> draft)
    doc_tool.py export   DRAFT.md --docx OUT.docx   Word file: headings, paragraphs, lists, quotes, tables,
                                                    **bold**, *italic*, `code`, [links](url)

Open notes are lines or spans marked [TODO ...], [?] or [[...]] - questions for the user.
Exit codes: 0 ok, 1 nothing to compare or a check failed, 2 bad arguments.
"""
import argparse
import datetime
import difflib
import os
import re
import shutil
import sys

NOTE = re.compile(r'\[TODO[^\]]*\]|\[\?\]|\[\[[^\]]*\]\]')
HEADING = re.compile(r'(#{1,6})[ \t]+(.*?)[ \t]*#*[ \t]*$')
MAX_DIFF_LINES = 400


def fail(msg, code=2):
    print(f'doc_tool: {msg}', file=sys.stderr)
    sys.exit(code)


def read(path):
    try:
        with open(path, encoding='utf-8') as f:
            return f.read()
    except FileNotFoundError:
        fail(f'{path}: no such file')
    except UnicodeDecodeError:
        fail(f'{path}: not UTF-8 text')


def versions_of(draft):
    d = os.path.join(os.path.dirname(os.path.abspath(draft)), 'versions')
    stem = os.path.splitext(os.path.basename(draft))[0]
    found = {}
    if os.path.isdir(d):
        for f in os.listdir(d):
            m = re.fullmatch(re.escape(stem) + r'-v(\d+)\.md', f)
            if m:
                found[int(m.group(1))] = os.path.join(d, f)
    return d, stem, found


def words(text):
    return len(re.findall(r"[\w'-]+", text))


def cmd_outline(a):
    text = read(a.draft)
    sections, current, fence = [], ['(before the first heading)', 0, []], False
    for line in text.splitlines():
        if line.startswith('```'):
            fence = not fence
        m = None if fence else HEADING.fullmatch(line)
        if m:
            sections.append(current)
            current = [('  ' * (len(m.group(1)) - 1)) + m.group(2), 0, []]
        else:
            current[1] += words(line)
        current[2] += NOTE.findall(line)
    sections.append(current)
    for title, n, notes in sections:
        if title.startswith('(before') and n == 0 and not notes:
            continue
        print(f'{n:>6} words  {title}' + (f'   <- {len(notes)} open note(s)' if notes else ''))
    notes = [n for _, _, ns in sections for n in ns]
    print(f'total: {words(text)} words, {len(notes)} open note(s)')
    for n in notes[:30]:
        print(f'  open: {n}')


def cmd_snapshot(a):
    text = read(a.draft)
    d, stem, found = versions_of(a.draft)
    os.makedirs(d, exist_ok=True)
    n = max(found, default=0) + 1
    if found and read(found[n - 1]) == text:
        print(f'unchanged since v{n - 1}; no new version')
        return 0
    target = os.path.join(d, f'{stem}-v{n}.md')
    shutil.copyfile(a.draft, target)
    with open(os.path.join(d, 'CHANGES.md'), 'a', encoding='utf-8') as log:
        stamp = datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')
        log.write(f'- v{n} ({stamp}, {words(text)} words){": " + a.note if a.note else ""}\n')
    print(f'saved v{n}: {target}')
    if found:
        old = read(found[n - 1]).splitlines()
        added = removed = 0
        for line in difflib.unified_diff(old, text.splitlines(), lineterm='', n=0):
            if line.startswith('+') and not line.startswith('+++'):
                added += 1
            elif line.startswith('-') and not line.startswith('---'):
                removed += 1
        print(f'since v{n - 1}: {added} line(s) added, {removed} removed')
    return 0


def cmd_diff(a):
    d, stem, found = versions_of(a.draft)
    if not found:
        fail('no versions yet: run snapshot first', 1)
    start = a.frm if a.frm is not None else max(found)
    if start not in found or (a.to is not None and a.to not in found):
        fail(f'unknown version; there are v{", v".join(str(k) for k in sorted(found))}')
    new_name = f'v{a.to}' if a.to is not None else 'draft'
    new = read(found[a.to] if a.to is not None else a.draft)
    lines = list(difflib.unified_diff(read(found[start]).splitlines(), new.splitlines(), f'v{start}', new_name, lineterm=''))
    if not lines:
        print(f'no differences between v{start} and {new_name}')
        return 0
    for line in lines[:MAX_DIFF_LINES]:
        print(line)
    if len(lines) > MAX_DIFF_LINES:
        print(f'... {len(lines) - MAX_DIFF_LINES} more diff lines')
    return 0


INLINE = re.compile(r'(\*\*[^*]+\*\*|__[^_]+__|\*[^*\s][^*]*\*|_[^_\s][^_]*_|`[^`]+`|\[[^\]]+\]\([^)\s]+\))')


def add_inline(par, text):
    for part in INLINE.split(text):
        if not part:
            continue
        if part[:2] in ('**', '__') and len(part) > 4 and part[-2:] == part[:2]:
            par.add_run(part[2:-2]).bold = True
        elif part[0] in '*_' and len(part) > 2 and part[-1] == part[0]:
            par.add_run(part[1:-1]).italic = True
        elif part[0] == '`' and part[-1] == '`':
            run = par.add_run(part[1:-1])
            run.font.name = 'DejaVu Sans Mono'
        elif part[0] == '[' and '](' in part:
            label, url = part[1:-1].split('](', 1)
            par.add_run(label).underline = True
            par.add_run(f' ({url})')
        else:
            par.add_run(part)


def table_rows(block):
    rows = []
    for line in block:
        cells = [c.strip() for c in line.strip().strip('|').split('|')]
        if all(re.fullmatch(r':?-{3,}:?', c) for c in cells if c):
            continue
        rows.append(cells)
    return rows


def cmd_export(a):
    try:
        import docx
    except ImportError:
        fail('python-docx is not in this image; give the user the Markdown file instead', 1)
    text = read(a.draft)
    doc = docx.Document()
    lines = text.splitlines()
    i, para = 0, []

    def flush():
        if para:
            add_inline(doc.add_paragraph(), ' '.join(l.strip() for l in para))
            para.clear()

    while i < len(lines):
        line = lines[i]
        h = HEADING.fullmatch(line)
        if line.startswith('```'):
            flush()
            j = i + 1
            while j < len(lines) and not lines[j].startswith('```'):
                j += 1
            p = doc.add_paragraph()
            p.add_run('\n'.join(lines[i + 1:j])).font.name = 'DejaVu Sans Mono'
            i = j + 1
            continue
        if h:
            flush()
            level = len(h.group(1)) - (0 if a.title_is_h1 else 1)    # "# " is the title (level 0) by default
            add_inline(doc.add_heading('', level=level), h.group(2))
        elif line.strip().startswith('|') and i + 1 < len(lines) and re.fullmatch(r'[\s|:-]+', lines[i + 1].strip()) and '-' in lines[i + 1]:
            flush()
            j = i
            while j < len(lines) and lines[j].strip().startswith('|'):
                j += 1
            rows = table_rows(lines[i:j])
            cols = max(len(r) for r in rows)
            t = doc.add_table(rows=0, cols=cols)
            t.style = 'Table Grid'
            for r_i, r in enumerate(rows):
                cells = t.add_row().cells
                for c_i, value in enumerate(r):
                    cells[c_i].text = ''
                    run = cells[c_i].paragraphs[0].add_run(value)
                    run.bold = r_i == 0
            i = j
            continue
        elif re.match(r'\s*[-*+] ', line):
            flush()
            depth = min((len(line) - len(line.lstrip())) // 2, 2)
            add_inline(doc.add_paragraph(style='List Bullet' + (f' {depth + 1}' if depth else '')), re.sub(r'^\s*[-*+] ', '', line))
        elif re.match(r'\s*\d+[.)] ', line):
            flush()
            add_inline(doc.add_paragraph(style='List Number'), re.sub(r'^\s*\d+[.)] ', '', line))
        elif line.startswith('>'):
            flush()
            add_inline(doc.add_paragraph(style='Quote'), line.lstrip('> '))
        elif re.fullmatch(r'\s*(-{3,}|\*{3,})\s*', line):
            flush()
        elif not line.strip():
            flush()
        else:
            para.append(line)
        i += 1
    flush()
    out = os.path.abspath(a.docx)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    doc.save(out)
    notes = NOTE.findall(text)
    print(f'wrote {out} ({len(doc.paragraphs)} paragraphs, {len(doc.tables)} tables)')
    if notes:
        print(f'warning: {len(notes)} open note(s) are still in the text, e.g. {notes[0]}')
    return 0


def main():
    ap = argparse.ArgumentParser(description='Helpers for writing a document with the user.')
    sub = ap.add_subparsers(dest='cmd', required=True)
    p = sub.add_parser('outline')
    p.add_argument('draft')
    p = sub.add_parser('snapshot')
    p.add_argument('draft')
    p.add_argument('--note', help='what changed (kept in versions/CHANGES.md)')
    p = sub.add_parser('diff')
    p.add_argument('draft')
    p.add_argument('--from', dest='frm', type=int)
    p.add_argument('--to', type=int)
    p = sub.add_parser('export')
    p.add_argument('draft')
    p.add_argument('--docx', required=True)
    p.add_argument('--title-is-h1', action='store_true', help='make "# " a Heading 1 instead of the document title')
    a = ap.parse_args()
    return {'outline': cmd_outline, 'snapshot': cmd_snapshot, 'diff': cmd_diff, 'export': cmd_export}[a.cmd](a) or 0


if __name__ == '__main__':
    sys.exit(main())
