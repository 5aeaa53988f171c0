/*
 * doc-coauthoring and the pptx skill's editing, followed literally in a real sandbox (docs/contract.md#skills):
 * the commands are the lines the SKILL.md shows; drafts are written and edited with the workspace
 * tools the model uses (create_file, str_replace), results are read back with python-docx and
 * the deck's own XML.
 */
import { copyFile, readFile } from 'node:fs/promises'
import { join } from 'node:path'
import t from 'tap'
import { dockerOrSkip } from './docker.js'
import { commandOf, skillChat } from './skill-recipes.js'

const gate = await dockerOrSkip()
const DRAFT = '/mnt/user-data/outputs/proposal/draft.md'

const OUTLINE = `# Library renovation proposal

## Why now

The reading room is closed two days a week. [TODO ask for visitor numbers]

## Plan

- Replace the lighting
- New shelving

## Budget

| Item | Cost |
|---|---|
| Lighting | 12,000 |
`

const DECK = `{"title": "Pitch", "slides": [
  {"type": "title", "title": "ACME Corp pitch", "subtitle": "Q3 2026"},
  {"type": "bullets", "title": "Why ACME Corp", "bullets": ["Fast", "Cheap"], "notes": "mention ACME Corp history"},
  {"type": "bullets", "title": "Team", "bullets": ["Ann", "Bob"]},
  {"type": "bullets", "title": "Old slide", "bullets": ["remove me"], "notes": "old notes"},
  {"type": "bullets", "title": "Next", "bullets": ["Sign in Q3 2026"]}
]}`

t.test('doc-coauthoring and pptx editing as their SKILL.md says', gate, async t => {
  const chat = await skillChat(t, 'docs')
  const { sh, tool } = chat

  // the doc-coauthoring workflow keeps versions, shows diffs and exports a Word file
  t.test('doc-coauthoring', async t => {
    const md = await sh('cat /mnt/skills/public/doc-coauthoring/SKILL.md')
    const S = 'python3 /mnt/skills/public/doc-coauthoring/scripts/doc_tool.py'
    await sh(commandOf(t, md, 'mkdir -p /mnt/user-data/outputs/proposal'))
    await tool('create_file', { description: 'outline', path: DRAFT, file_text: OUTLINE })
    const outline = commandOf(t, md, S, 'outline')
    t.match(await sh(outline), /\d+ words {2}Library renovation proposal\n +\d+ words {4}Why now {3}<- 1 open note\(s\)\n[\s\S]*total: \d+ words, 1 open note\(s\)\n {2}open: \[TODO ask for visitor numbers\]/)
    const snapshot = commandOf(t, md, S, 'snapshot')
    t.match(await sh(snapshot), 'saved v1: /mnt/user-data/outputs/proposal/versions/draft-v1.md')
    t.match(await sh(snapshot), 'unchanged since v1; no new version')

    await tool('str_replace', { description: 'user answer', path: DRAFT, old_str: '[TODO ask for visitor numbers]', new_str: 'It had 41,000 visitors last year.' })
    const diffLast = commandOf(t, md, S, 'diff /mnt/user-data/outputs/proposal/draft.md')
    t.match(await sh(diffLast), /--- v1\n\+\+\+ draft\n[\s\S]*-The reading room is closed two days a week\. \[TODO ask for visitor numbers\]\n\+The reading room is closed two days a week\. It had 41,000 visitors last year\./)
    t.match(await sh(snapshot), /saved v2[\s\S]*since v1: 1 line\(s\) added, 1 removed/)
    await tool('str_replace', { description: 'user edit', path: DRAFT, old_str: '- New shelving', new_str: '- New shelving\n- Longer opening hours' })
    t.match(await sh(snapshot), /saved v3[\s\S]*since v2: 1 line\(s\) added, 0 removed/)
    t.match(await sh(commandOf(t, md, S, '--from 1 --to 3')), /--- v1\n\+\+\+ v3\n[\s\S]*\+- Longer opening hours/)
    t.match(await readFile(join(chat.outputs, 'proposal', 'versions', 'CHANGES.md'), 'utf8'), /^- v1 \(.*\): outline\n- v2 .*\n- v3 .*\n$/)

    t.match(await sh(outline), 'total: ', 'outline after the review')
    t.notMatch(await sh(outline), /[1-9]\d* open note/, 'no open notes left')
    t.match(await sh(commandOf(t, md, S, 'export')), /wrote \/mnt\/user-data\/outputs\/proposal\/proposal\.docx \(\d+ paragraphs, 1 tables\)/)
    const back = await sh(`python3 -c "
import docx; d = docx.Document('/mnt/user-data/outputs/proposal/proposal.docx')
for p in d.paragraphs: print(p.style.name, '|', p.text)
print([[c.text for c in r.cells] for r in d.tables[0].rows])"`)
    t.match(back, /^Title \| Library renovation proposal\nHeading 1 \| Why now\nNormal \| The reading room is closed two days a week\. It had 41,000 visitors last year\.\nHeading 1 \| Plan\nList Bullet \| Replace the lighting\nList Bullet \| New shelving\nList Bullet \| Longer opening hours\nHeading 1 \| Budget\n/)
    t.match(back, "[['Item', 'Cost'], ['Lighting', '12,000']]")
  })

  // the pptx skill edits an uploaded deck (text replaced, a slide deleted), the original untouched
  t.test('pptx: read and edit an uploaded deck', async t => {
    const md = await sh('cat /mnt/skills/public/pptx/SKILL.md')
    await tool('create_file', { description: 'deck outline', path: '/tmp/pitch.json', file_text: DECK })
    t.match(await sh('node /mnt/skills/public/pptx/scripts/make_deck.js /tmp/pitch.json /mnt/user-data/outputs/pitch.pptx'), 'wrote /mnt/user-data/outputs/pitch.pptx (5 slides)')
    await copyFile(join(chat.outputs, 'pitch.pptx'), join(chat.uploads, 'pitch.pptx'))
    t.match(await sh(commandOf(t, md, 'node /mnt/skills/public/pptx/scripts/read_deck.js /mnt/user-data/uploads/pitch.pptx')), /^5 slides\n--- slide 1\nACME Corp pitch\nQ3 2026\n/)
    const edit = commandOf(t, md, 'python3 /mnt/skills/public/pptx/scripts/edit_deck.py')
    t.match(edit, '--replace "Q3 2026=>Q4 2026" --replace "ACME Corp=>Acme Group" --delete-slide 4')
    const out = await sh(`${edit}; echo rc=$?`)
    t.match(out, "replaced 2 x 'Q3 2026' -> 'Q4 2026'\nreplaced 3 x 'ACME Corp' -> 'Acme Group'\ndeleted slide 4\nwrote /mnt/user-data/outputs/pitch-v2.pptx (4 slides)\nrc=0")
    const text = await sh('node /mnt/skills/public/pptx/scripts/read_deck.js /mnt/user-data/outputs/pitch-v2.pptx')
    t.match(text, /^4 slides\n--- slide 1\nAcme Group pitch\nQ4 2026\n--- slide 2\nWhy Acme Group\n[\s\S]*--- slide 3\nTeam\n[\s\S]*--- slide 4\nNext\nSign in Q4 2026\n$/)
    t.notMatch(text, /Old slide|ACME Corp|Q3 2026/)
    // pptxgenjs itself declares slide masters it never writes; only the slide and notes parts are ours to check.
    const parts = await sh(`python3 -c "
import re, zipfile; z = zipfile.ZipFile('/mnt/user-data/outputs/pitch-v2.pptx'); names = set(z.namelist())
pres = z.read('ppt/presentation.xml').decode(); rels = z.read('ppt/_rels/presentation.xml.rels').decode(); ct = z.read('[Content_Types].xml').decode()
print('sldIds', len(re.findall('<p:sldId ', pres)))
print('dangling', [t for t in re.findall('Target=\\"([^\\"]+)\\"', rels) if not t.startswith('http') and 'ppt/' + t not in names])
print('overrides', [p for p in re.findall('PartName=\\"/(ppt/(?:slides|notesSlides)/[^\\"]+)\\"', ct) if p not in names])
print('notes', sorted(n for n in names if re.fullmatch(r'ppt/notesSlides/notesSlide\\d+\\.xml', n)))"`)
    t.match(parts, "sldIds 4\ndangling []\noverrides []\nnotes ['ppt/notesSlides/notesSlide1.xml', 'ppt/notesSlides/notesSlide2.xml', 'ppt/notesSlides/notesSlide3.xml', 'ppt/notesSlides/notesSlide5.xml']", 'no dangling parts; the deleted slide took its notes')
    t.match(await sh('unzip -p /mnt/user-data/outputs/pitch-v2.pptx ppt/notesSlides/notesSlide2.xml | grep -c "mention Acme Group history"'), /^1/, 'speaker notes are edited too')
    t.match(await sh('node /mnt/skills/public/pptx/scripts/read_deck.js /mnt/user-data/uploads/pitch.pptx | head -4'), 'ACME Corp pitch', 'the upload is unchanged')
    t.match(await sh('python3 /mnt/skills/public/pptx/scripts/edit_deck.py /mnt/user-data/uploads/pitch.pptx /tmp/x.pptx --replace "Nowhere=>x"; echo rc=$?'), /not found anywhere: \['Nowhere'\][\s\S]*rc=1/)
    t.match(await sh('python3 /mnt/skills/public/pptx/scripts/edit_deck.py /mnt/user-data/uploads/pitch.pptx /tmp/x.pptx --delete-slide 9; echo rc=$?'), /there is no slide 9 \(the deck has 5\)[\s\S]*rc=2/)
  })
})
