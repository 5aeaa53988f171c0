#!/usr/bin/env python3
"""Edit an existing .pptx in place of rebuilding it: replace text, delete slides. Styling is kept.

    edit_deck.py IN.pptx OUT.pptx [--replace OLD=>NEW ...] [--delete-slide N ...]

--replace changes every occurrence of OLD in slide text and speaker notes (case-sensitive).
Inside one text run the run's formatting is kept; when OLD spans several runs of a paragraph,
the paragraph's text goes into its first run (its formatting wins). --delete-slide N removes
slide N (numbered as read_deck.js shows them; give several to remove several). IN is never
changed. Prints what it changed; exits 1 when an OLD text was found nowhere, 2 on bad input.
"""
import argparse
import os
import re
import sys
import zipfile
from xml.sax.saxutils import escape

RUN = re.compile(r'(<a:t(?:\s[^>]*)?>)([^<]*)(</a:t>)')
PARA = re.compile(r'<a:p(?:\s[^>]*)?>.*?</a:p>', re.S)


def fail(msg):
    print(f'edit_deck: {msg}', file=sys.stderr)
    sys.exit(2)


def unescape(s):
    return s.replace('&lt;', '<').replace('&gt;', '>').replace('&quot;', '"').replace('&apos;', "'").replace('&amp;', '&')


def replace_in_paragraph(para, old, new):
    runs = list(RUN.finditer(para))
    texts = [unescape(m.group(2)) for m in runs]
    joined = ''.join(texts)
    if old not in joined:
        return para, 0
    count = joined.count(old)
    if all(old not in t for t in texts) or sum(t.count(old) for t in texts) != count:
        texts = [joined.replace(old, new)] + [''] * (len(texts) - 1)   # spans runs
    else:
        texts = [t.replace(old, new) for t in texts]
    out, last = [], 0
    for m, t in zip(runs, texts):
        out += [para[last:m.start()], m.group(1), escape(t), m.group(3)]
        last = m.end()
    out.append(para[last:])
    return ''.join(out), count


def rels_of(part):
    return f'{os.path.dirname(part)}/_rels/{os.path.basename(part)}.rels'


def slide_order(z):
    """Slide part names in presentation order, with their sldId elements and relationship ids."""
    pres = z.read('ppt/presentation.xml').decode('utf-8')
    rels = z.read('ppt/_rels/presentation.xml.rels').decode('utf-8')
    targets = {}
    for rel in re.findall(r'<Relationship\s[^>]*/>', rels):
        rid, tgt = re.search(r'\bId="([^"]+)"', rel), re.search(r'\bTarget="([^"]+)"', rel)
        if rid and tgt:
            targets[rid.group(1)] = 'ppt/' + tgt.group(1).lstrip('/').removeprefix('ppt/')
    order = []
    for el in re.findall(r'<p:sldId\s[^>]*/>', pres):
        rid = re.search(r'\br:id="([^"]+)"', el).group(1)
        order.append((targets[rid], el, rid))
    return order


def main():
    ap = argparse.ArgumentParser(description='Replace text in or delete slides of a .pptx.')
    ap.add_argument('input')
    ap.add_argument('output')
    ap.add_argument('--replace', action='append', default=[], metavar='OLD=>NEW')
    ap.add_argument('--delete-slide', action='append', type=int, default=[], metavar='N')
    a = ap.parse_args()
    pairs = []
    for r in a.replace:
        if '=>' not in r or not r.split('=>', 1)[0]:
            fail(f'--replace wants OLD=>NEW, got {r!r}')
        pairs.append(tuple(r.split('=>', 1)))
    if not pairs and not a.delete_slide:
        fail('nothing to do: give --replace and/or --delete-slide')
    if os.path.abspath(a.input) == os.path.abspath(a.output):
        fail('write to a new file; IN stays as it was')
    try:
        z = zipfile.ZipFile(a.input)
        order = slide_order(z)
    except (OSError, zipfile.BadZipFile, KeyError, AttributeError) as e:
        fail(f'{a.input} is not a readable .pptx ({e})')
    for n in a.delete_slide:
        if not 1 <= n <= len(order):
            fail(f'there is no slide {n} (the deck has {len(order)})')
    if len(set(a.delete_slide)) == len(order):
        fail('cannot delete every slide')
    drop = {order[n - 1][0] for n in a.delete_slide}
    drop |= {rels_of(p) for p in list(drop)}
    for rels in list(drop):     # a deleted slide's speaker notes go with it
        if rels in z.namelist():
            for tgt in re.findall(r'Target="\.\./notesSlides/(notesSlide\d+\.xml)"', z.read(rels).decode('utf-8')):
                drop |= {f'ppt/notesSlides/{tgt}', rels_of(f'ppt/notesSlides/{tgt}')}
    found = {old: 0 for old, _ in pairs}
    tmp = a.output + '.part'
    with zipfile.ZipFile(tmp, 'w', zipfile.ZIP_DEFLATED) as out:
        for info in z.infolist():
            name = info.filename
            if name in drop:
                continue
            data = z.read(name)
            if re.fullmatch(r'ppt/(slides/slide|notesSlides/notesSlide)\d+\.xml', name) and pairs:
                xml = data.decode('utf-8')
                for old, new in pairs:
                    def sub(m, old=old, new=new):
                        text, n = replace_in_paragraph(m.group(0), old, new)
                        found[old] += n
                        return text
                    xml = PARA.sub(sub, xml)
                data = xml.encode('utf-8')
            elif name == 'ppt/presentation.xml' and a.delete_slide:
                xml = data.decode('utf-8')
                for n in a.delete_slide:
                    xml = xml.replace(order[n - 1][1], '')
                data = xml.encode('utf-8')
            elif name == 'ppt/_rels/presentation.xml.rels' and a.delete_slide:
                xml = data.decode('utf-8')
                for n in a.delete_slide:
                    xml = re.sub(r'<Relationship\s[^>]*\bId="' + re.escape(order[n - 1][2]) + r'"[^>]*/>', '', xml)
                data = xml.encode('utf-8')
            elif name == '[Content_Types].xml' and a.delete_slide:
                xml = data.decode('utf-8')
                for part in drop:
                    xml = re.sub(r'<Override\s[^>]*PartName="/' + re.escape(part) + r'"[^>]*/>', '', xml)
                data = xml.encode('utf-8')
            out.writestr(info, data)
    os.replace(tmp, a.output)
    for old, new in pairs:
        print(f'replaced {found[old]} x {old!r} -> {new!r}')
    for n in sorted(set(a.delete_slide)):
        print(f'deleted slide {n}')
    print(f'wrote {a.output} ({len(order) - len(set(a.delete_slide))} slides)')
    missing = [old for old, n in found.items() if n == 0]
    if missing:
        print(f'edit_deck: not found anywhere: {missing}', file=sys.stderr)
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
