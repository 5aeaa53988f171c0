#!/usr/bin/env python3
"""Create, validate and package a skill the user can install as a user skill.

    skill_tool.py init NAME --description TEXT [--dir ~/skills]   new folder with a SKILL.md skeleton
    skill_tool.py validate DIR                                     check it as the server will
    skill_tool.py package DIR [--out /mnt/user-data/outputs]       validate, then write NAME.zip

The rules are the server's (docs/contract.md#skills): SKILL.md at the top of the folder, starting
with YAML front matter between two --- lines; `name` matches ^[a-z0-9][a-z0-9-]{0,63}$
(and should equal the folder name); `description` has 1 to 1,024 characters once its
whitespace is collapsed. The ZIP may hold no symlinks or special files, at most 5,000
entries, 200 MiB uncompressed and 50 MiB compressed; SKILL.md at most 256 KiB.
The front matter reader below understands the YAML a skill needs (plain, quoted and
block scalars, nested keys it ignores) and refuses what it cannot read for sure.
Exit codes: 0 ok (warnings allowed), 1 invalid, 2 bad arguments.
"""
import argparse
import hashlib
import os
import re
import stat
import sys
import zipfile

NAME_RE = re.compile(r'[a-z0-9][a-z0-9-]{0,63}')
KEY_RE = re.compile(r'([A-Za-z0-9_][A-Za-z0-9_. -]*?)[ \t]*:(?:[ \t]+(.*))?')
MAX_SKILL_MD = 256 * 1024
MAX_ENTRIES = 5000
MAX_BYTES = 200 * 1024 * 1024
MAX_ZIP = 50 * 1024 * 1024
SKIP = {'.DS_Store', '__pycache__', '.git', 'Thumbs.db'}
NOT_STRING = re.compile(r'(~|null|Null|NULL|true|True|TRUE|false|False|FALSE'
                        r'|[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+'
                        r'|[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?'
                        r'|[-+]?\.(inf|Inf|INF)|\.nan|\.NaN|\.NAN)')


class Invalid(Exception):
    pass


def block_lines(lines, i):
    """The indented (or blank) lines that follow line i-1; returns (lines, next index)."""
    out = []
    while i < len(lines) and (not lines[i].strip() or lines[i][0] == ' '):
        out.append(lines[i])
        i += 1
    while out and not out[-1].strip():
        out.pop()
    return out, i


def plain(value, more, key):
    """A plain (unquoted) scalar: a string, or another type (number, bool, null) as None."""
    v = re.sub(r'(^|[ \t])#.*$', '', value).strip()
    if v[:1] in ('[', '{'):
        return None
    if v[:1] in ('&', '*', '!', '%', '@', '`', '|', '>', '"', "'") or v.startswith(('- ', '? ')):
        raise Invalid(f'{key}: value starts with {v[:1]!r}, which this reader does not accept; quote it')
    parts = [v] + [re.sub(r'(^|[ \t])#.*$', '', l).strip() for l in more]
    text = ' '.join(p for p in parts if p)
    if re.search(r': |:$', text) or any(re.search(r'(^|[ \t])#', l) for l in more):
        raise Invalid(f'{key}: a plain value may not contain ": " or " #" (YAML reads them as structure); put the value in quotes or use a block scalar (>)')
    if not more and NOT_STRING.fullmatch(text or '~'):
        return None
    return text


def quoted(value, more, key):
    q = value[0]
    body = value[1:]
    if q == "'":
        m = re.fullmatch(r"((?:[^']|'')*)'[ \t]*(#.*)?", body)
        if not m or more:
            raise Invalid(f'{key}: single-quoted value must end on its line (use a block scalar > for long text)')
        return m.group(1).replace("''", "'")
    m = re.fullmatch(r'((?:[^"\\]|\\.)*)"[ \t]*(#.*)?', body)
    if not m or more:
        raise Invalid(f'{key}: double-quoted value must end on its line (use a block scalar > for long text)')
    esc = {'n': '\n', 't': '\t', '"': '"', '\\': '\\', '/': '/', '0': '\0', ' ': ' '}
    out, s, i = [], m.group(1), 0
    while i < len(s):
        if s[i] == '\\':
            if s[i + 1] not in esc:
                raise Invalid(f'{key}: escape \\{s[i + 1]} is not supported here')
            out.append(esc[s[i + 1]])
            i += 2
        else:
            out.append(s[i])
            i += 1
    return ''.join(out)


def parse_front_matter(raw):
    """Returns (mapping, body). Values are strings, or None for anything else (lists, numbers...)."""
    text = raw.lstrip('\ufeff').replace('\r\n', '\n').replace('\r', '\n')
    if not text.startswith('---\n'):
        raise Invalid('SKILL.md must start with a line containing only ---')
    m = re.search(r'\n---[ \t]*(\n|$)', text[3:])
    if not m:
        raise Invalid('the front matter is not closed by a --- line')
    yaml_text, body = text[4:3 + m.start() + 1], text[3 + m.end():]
    lines = yaml_text.split('\n')
    data, i = {}, 0
    while i < len(lines):
        line = lines[i]
        if not line.strip() or line.lstrip().startswith('#'):
            i += 1
            continue
        if line[0] in ' \t':
            raise Invalid(f'front matter line {i + 2} is indented but belongs to no key')
        km = KEY_RE.fullmatch(line)
        if not km:
            raise Invalid(f'front matter line {i + 2} is not "key: value": {line[:60]!r}')
        key, value = km.group(1), (km.group(2) or '').strip()
        if key in data:
            raise Invalid(f'key {key!r} appears twice')
        more, i = block_lines(lines, i + 1)
        if value[:1] in ('|', '>') and re.fullmatch(r'[|>][-+]?[1-9]?[-+]?[ \t]*(#.*)?', value):
            nonblank = [l for l in more if l.strip()]
            indent = min((len(l) - len(l.lstrip(' ')) for l in nonblank), default=0)
            if nonblank and indent == 0:
                raise Invalid(f'{key}: block scalar lines must be indented with spaces')
            data[key] = '\n'.join(l[indent:] for l in more)
        elif value[:1] in ('"', "'"):
            data[key] = quoted(value, [l for l in more if l.strip()], key)
        elif value == '' and more:
            data[key] = None    # a nested mapping or list: allowed, ignored
        else:
            data[key] = plain(value, [l for l in more if l.strip()], key)
    return data, body


def check_front_matter(raw, folder):
    """Errors and warnings for one SKILL.md text; also returns the name."""
    errors, warnings = [], []
    try:
        data, body = parse_front_matter(raw)
    except Invalid as e:
        return None, [str(e)], warnings
    name, desc = data.get('name'), data.get('description')
    if not isinstance(name, str) or not NAME_RE.fullmatch(name):
        errors.append('name is missing or not lowercase letters, digits and dashes (1-64, starting with a letter or digit)')
        name = None
    elif folder is not None and name != folder:
        warnings.append(f'name {name!r} differs from the folder name {folder!r}; the ZIP folder is named after `name`')
    if not isinstance(desc, str):
        errors.append('description is missing (or not text)')
    else:
        one = ' '.join(desc.split())
        if not 1 <= len(one) <= 1024:
            errors.append(f'description has {len(one)} characters; it must have 1 to 1,024')
        elif len(one) < 40:
            warnings.append('description is short: say what the skill does AND when to use it')
        elif len(one) > 300:
            warnings.append('description is longer than 300 characters; the prompt shows only the first 300')
    if not body.strip():
        warnings.append('SKILL.md has no instructions after the front matter')
    if re.search(r'(^|[ \t])REPLACE:', body, re.M):
        errors.append('the body still has REPLACE: placeholders from `init`; write the real instructions')
    return name, errors, warnings


def walk(root):
    """Files to package as (relative path, absolute path, executable); raises Invalid on unsafe entries."""
    files, total = [], 0
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP)
        for d in dirnames:
            if os.path.islink(os.path.join(dirpath, d)):
                raise Invalid(f'{os.path.relpath(os.path.join(dirpath, d), root)} is a symlink; the server refuses symlinks - copy the real folder instead')
        for f in sorted(filenames):
            if f in SKIP or f.endswith('.pyc'):
                continue
            full = os.path.join(dirpath, f)
            rel = os.path.relpath(full, root).replace(os.sep, '/')
            st = os.lstat(full)
            if stat.S_ISLNK(st.st_mode):
                raise Invalid(f'{rel} is a symlink; the server refuses symlinks - copy the file instead')
            if not stat.S_ISREG(st.st_mode):
                raise Invalid(f'{rel} is not a regular file')
            if re.search(r'[\x00-\x1f\x7f\\]', rel) or len(rel.encode()) > 1000 or rel.count('/') > 30:
                raise Invalid(f'{rel!r}: control characters, backslashes, very long or very deep paths are refused')
            total += st.st_size
            files.append((rel, full, bool(st.st_mode & 0o111)))
    if len(files) > MAX_ENTRIES:
        raise Invalid(f'{len(files)} files; at most {MAX_ENTRIES}')
    if total > MAX_BYTES:
        raise Invalid(f'{total} bytes; at most {MAX_BYTES} uncompressed')
    return files


def validate(folder):
    folder = os.path.abspath(os.path.expanduser(folder))
    md = os.path.join(folder, 'SKILL.md')
    if not os.path.isdir(folder):
        raise Invalid(f'{folder} is not a folder')
    if os.path.islink(md) or not os.path.isfile(md):
        raise Invalid(f'{md} is missing (it must be a regular file at the top of the folder)')
    if os.path.getsize(md) > MAX_SKILL_MD:
        raise Invalid('SKILL.md is larger than 256 KiB')
    with open(md, encoding='utf-8') as f:
        raw = f.read()
    name, errors, warnings = check_front_matter(raw, os.path.basename(folder))
    files = walk(folder)
    return folder, name, files, errors, warnings


def report(errors, warnings):
    for w in warnings:
        print(f'warning: {w}')
    for e in errors:
        print(f'error: {e}')


def cmd_validate(a):
    folder, name, files, errors, warnings = validate(a.dir)
    report(errors, warnings)
    if errors:
        print(f'INVALID: {folder}')
        return 1
    print(f'OK: {name} ({len(files)} files)')
    return 0


def cmd_package(a):
    folder, name, files, errors, warnings = validate(a.dir)
    report(errors, warnings)
    if errors:
        print(f'INVALID: {folder} - nothing packaged')
        return 1
    os.makedirs(a.out, exist_ok=True)
    target = os.path.join(a.out, f'{name}.zip')
    tmp = target + '.part'
    with zipfile.ZipFile(tmp, 'w', zipfile.ZIP_DEFLATED) as z:
        for rel, full, exe in files:
            info = zipfile.ZipInfo(f'{name}/{rel}', date_time=(2020, 1, 1, 0, 0, 0))
            info.create_system = 3                      # Unix: the mode bits below are read
            info.external_attr = ((0o100755 if exe else 0o100644) << 16)
            info.compress_type = zipfile.ZIP_DEFLATED
            with open(full, 'rb') as src:
                z.writestr(info, src.read())
    size = os.path.getsize(tmp)
    if size > MAX_ZIP:
        os.unlink(tmp)
        print(f'error: the ZIP would be {size} bytes; at most {MAX_ZIP}')
        return 1
    os.replace(tmp, target)
    with open(target, 'rb') as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    print(f'wrote {target} ({len(files)} files, {size} bytes)')
    print(f'sha256 {digest}')
    return 0


TEMPLATE = '''---
name: {name}
description: {description}
---

# {title}

REPLACE: one or two sentences on what this skill is for.

## Steps

1. REPLACE: the first thing to do, with the exact command.
2. REPLACE: the next step.

## Check the result

REPLACE: how to verify the work before answering (a command and what it should print).
'''


def cmd_init(a):
    if not NAME_RE.fullmatch(a.name):
        print('error: the name must be lowercase letters, digits and dashes (1-64, starting with a letter or digit)')
        return 2
    desc = ' '.join(a.description.split())
    if not 1 <= len(desc) <= 1024:
        print('error: the description must have 1 to 1,024 characters')
        return 2
    folder = os.path.join(os.path.expanduser(a.dir), a.name)
    if os.path.exists(folder):
        print(f'error: {folder} exists already')
        return 2
    os.makedirs(os.path.join(folder, 'scripts'))
    quoted_desc = '"' + desc.replace('\\', '\\\\').replace('"', '\\"') + '"'
    with open(os.path.join(folder, 'SKILL.md'), 'w', encoding='utf-8') as f:
        f.write(TEMPLATE.format(name=a.name, description=quoted_desc, title=a.name.replace('-', ' ').capitalize()))
    print(f'created {folder}/SKILL.md and {folder}/scripts/ - now replace the REPLACE: lines')
    return 0


def main():
    ap = argparse.ArgumentParser(description='Create, validate and package a user skill.')
    sub = ap.add_subparsers(dest='cmd', required=True)
    p = sub.add_parser('init')
    p.add_argument('name')
    p.add_argument('--description', required=True)
    p.add_argument('--dir', default='~/skills')
    p = sub.add_parser('validate')
    p.add_argument('dir')
    p = sub.add_parser('package')
    p.add_argument('dir')
    p.add_argument('--out', default='/mnt/user-data/outputs')
    a = ap.parse_args()
    try:
        return {'init': cmd_init, 'validate': cmd_validate, 'package': cmd_package}[a.cmd](a)
    except Invalid as e:
        print(f'error: {e}')
        print('INVALID')
        return 1
    except UnicodeDecodeError:
        print('error: SKILL.md is not UTF-8 text')
        return 1


if __name__ == '__main__':
    sys.exit(main())
