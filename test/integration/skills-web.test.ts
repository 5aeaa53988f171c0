/*
 * webapp-testing, frontend-design and skill-creator, followed literally in a real sandbox
 * (docs/contract.md#skills): the commands are the lines the SKILL.md shows. The skill-creator's ZIP is then
 * checked with the server's own user-skill code (zip-extract + the shared front matter rules).
 */
import { createHash } from 'node:crypto'
import { mkdtemp, readFile, readdir } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { parseFrontMatter } from '../../core/skill-front-matter.js'
import { extractSkillZip } from '../../plugins/user-skills/zip-extract.js'
import { dockerOrSkip } from './docker.js'
import { commandOf, skillChat } from './skill-recipes.js'

const gate = await dockerOrSkip()

const TODO_APP = `<!doctype html><html><head><title>Todo</title></head><body><h1>Todo</h1>
<input id="new"><button id="add">Add</button><ul id="list"></ul>
<script>document.getElementById('add').onclick = () => { const li = document.createElement('li'); li.textContent = document.getElementById('new').value; document.getElementById('list').append(li) }</script>
</body></html>`

const DASHBOARD = `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Team dashboard</title><style>:root{--accent:#1f6f5c}body{margin:0;font:16px/1.5 system-ui,sans-serif}main{max-width:1100px;margin:0 auto;padding:24px}</style></head>
<body><main><h1>Team dashboard</h1><svg viewBox="0 0 100 20" width="300"><rect width="60" height="20" fill="#1f6f5c"/></svg></main></body></html>`

const SKILL_BODY = `# Weekly report

Write the weekly status report from the user's notes.

## Steps

1. Read the notes with the file-reading skill.
2. Run \`python3 /mnt/skills/user/weekly-report/scripts/stamp.py\` for the report date.

## Check the result

The report has the sections Done, Next and Risks.
`

t.test('webapp-testing, frontend-design and skill-creator as their SKILL.md says', gate, async t => {
  const chat = await skillChat(t, 'web')
  const { sh, tool } = chat

  // webapp-testing starts a tiny server in the sandbox and its check passes, then fails on a broken app
  t.test('webapp-testing', async t => {
    const md = await sh('cat /mnt/skills/public/webapp-testing/SKILL.md')
    await tool('create_file', { description: 'the app', path: '/home/assistant/app/index.html', file_text: TODO_APP })
    const start = commandOf(t, md, '/mnt/skills/public/webapp-testing/scripts/start_server.sh 8000 --')
    t.match(await sh(start), /^ready: http:\/\/127\.0\.0\.1:8000\/ \(job webapp-8000, pid \d+; /, 'the app answers')
    const check = commandOf(t, md, 'node /mnt/skills/public/webapp-testing/scripts/check_page.js')
    const pass = await sh(`${check}; echo rc=$?`)
    t.match(pass, /ok {3}title contains "Todo"\nok {3}filled #new\nok {3}clicked #add\nok {3}text "Buy milk" present\nscreenshot: \/tmp\/todo\.png\nPASS\nrc=0/)
    t.match(await sh('python3 -c "from PIL import Image; print(Image.open(\'/tmp/todo.png\').size[0])"'), /^1280/)

    // The same check against a broken app: the click handler throws.
    await tool('str_replace', { description: 'break it', path: '/home/assistant/app/index.html', old_str: "const li = document.createElement('li');", new_str: "throw new Error('add is broken');" })
    const fail = await sh(`${check}; echo rc=$?`)
    t.match(fail, /FAIL --expect-text Buy milk: text not found/)
    t.match(fail, /FAIL page error: add is broken\nFAIL\nrc=1/)
    t.match(await sh('node /mnt/skills/public/webapp-testing/scripts/check_page.js http://127.0.0.1:8000/missing.js; echo rc=$?'), /FAIL HTTP 404: http:\/\/127\.0\.0\.1:8000\/missing\.js[\s\S]*rc=1/)
    t.match(await sh(commandOf(t, md, '/mnt/skills/public/webapp-testing/scripts/start_server.sh --stop 8000')), /job webapp-8000 stopped/)
    t.match(await sh('curl -s -o /dev/null -m 2 http://127.0.0.1:8000/; echo rc=$?'), /rc=7/, 'nothing answers after --stop')
    t.match(await sh('/mnt/skills/public/webapp-testing/scripts/start_server.sh 8001 -- python3 -c "import sys; print(\'boom\'); sys.exit(1)"; echo rc=$?'),
      /exited[\s\S]*boom[\s\S]*rc=1/, 'a crashing app is reported with its log')
  })

  // frontend-design previews a single-file artifact at two sizes and refuses outside dependencies
  t.test('frontend-design', async t => {
    const md = await sh('cat /mnt/skills/public/frontend-design/SKILL.md')
    await tool('create_file', { description: 'the artifact', path: '/mnt/user-data/outputs/dashboard.html', file_text: DASHBOARD })
    const preview = commandOf(t, md, 'node /mnt/skills/public/frontend-design/scripts/preview.js')
    const ok = await sh(`${preview}; echo rc=$?`)
    t.match(ok, /screenshot \/tmp\/preview\/dashboard-1280x800\.png {2}title "Team dashboard"\nscreenshot \/tmp\/preview\/dashboard-390x844\.png/)
    t.match(ok, /OK: no errors, nothing loaded from outside the file\nrc=0/)
    t.match(await sh('python3 -c "from PIL import Image; print(Image.open(\'/tmp/preview/dashboard-390x844.png\').size[0])"'), /^390/)
    await tool('str_replace', { description: 'add outside deps', path: '/mnt/user-data/outputs/dashboard.html', old_str: '</head>', new_str: '<link rel="stylesheet" href="style.css"><script src="https://cdn.example.com/lib.js"></script></head>' })
    const bad = await sh(`${preview}; echo rc=$?`)
    t.match(bad, 'loads a separate local file: file:///mnt/user-data/outputs/style.css (inline it)')
    t.match(bad, 'loads from the network: https://cdn.example.com/lib.js')
    t.match(bad, /rc=1/)
  })

  // skill-creator's ZIP passes the server's own user-ZIP-skill verifier
  t.test('skill-creator', async t => {
    const md = await sh('cat /mnt/skills/public/skill-creator/SKILL.md')
    const S = 'python3 /mnt/skills/public/skill-creator/scripts/skill_tool.py'
    t.match(await sh(commandOf(t, md, S, 'init weekly-report')), /created \/home\/assistant\/skills\/weekly-report\/SKILL\.md/)
    const validate = commandOf(t, md, S, 'validate ~/skills/weekly-report')
    t.match(await sh(`${validate}; echo rc=$?`), /error: the body still has REPLACE: placeholders[\s\S]*INVALID[\s\S]*rc=1/, 'the skeleton is not shippable')
    const skeleton = await sh('cat ~/skills/weekly-report/SKILL.md')
    const head = /^---\n[\s\S]*?\n---\n/.exec(skeleton)?.[0] ?? ''
    t.match(head, /^---\nname: weekly-report\ndescription: "Write the team's weekly status report/)
    await tool('create_file', { description: 'the skill', path: '/home/assistant/skills/weekly-report/SKILL.md', file_text: head + '\n' + SKILL_BODY })
    await tool('create_file', { description: 'its script', path: '/home/assistant/skills/weekly-report/scripts/stamp.py', file_text: 'import datetime\nprint(datetime.date.today())\n' })
    await sh('chmod +x ~/skills/weekly-report/scripts/stamp.py && mkdir -p ~/skills/weekly-report/scripts/__pycache__ && touch ~/skills/weekly-report/scripts/__pycache__/x.pyc')
    t.match(await sh(`${validate}; echo rc=$?`), /OK: weekly-report \(2 files\)\nrc=0/)
    const pkg = await sh(commandOf(t, md, S, 'package ~/skills/weekly-report'))
    t.match(pkg, /wrote \/mnt\/user-data\/outputs\/weekly-report\.zip \(2 files, \d+ bytes\)\nsha256 [0-9a-f]{64}/)

    const zip = join(chat.outputs, 'weekly-report.zip')
    const sha = createHash('sha256').update(await readFile(zip)).digest('hex')
    t.match(pkg, `sha256 ${sha}`, 'the printed hash is the zip_sha256 of the file')
    const dest = join(await mkdtemp(join(tmpdir(), 'skill-creator-')), 'x')
    await extractSkillZip(zip, dest, { maxEntries: 5000, maxBytes: 200 * 1024 * 1024 })
    t.same((await readdir(dest)).sort(), ['SKILL.md', 'scripts'], 'one top folder stripped, caches left out')
    t.same(await readdir(join(dest, 'scripts')), ['stamp.py'])
    t.match(parseFrontMatter(await readFile(join(dest, 'SKILL.md'), 'utf8')), { ok: true, name: 'weekly-report' }, "the server's front matter rules accept it")

    await sh('ln -s /etc/passwd ~/skills/weekly-report/passwd')
    t.match(await sh(`${commandOf(t, md, S, 'package ~/skills/weekly-report')}; echo rc=$?`), /passwd is a symlink[\s\S]*INVALID[\s\S]*rc=1/, 'a symlink is refused before packaging')
  })

  // the validator and the server agree on front matter (both accept or both refuse)
  t.test('skill_tool.py validate agrees with the server on front matter', async t => {
    const cases = [
      'name: a-b\ndescription: Plain text', 'name: a-b\r\ndescription: CRLF', 'name: a-b\ndescription: >\n  Folded\n  lines',
      'name: a-b\ndescription: |-\n  Literal', 'name: a-b\ndescription: "Quoted: colon"', "name: a-b\ndescription: 'it''s'",
      'name: a-b\ndescription: Use when: bad', 'name: A-b\ndescription: x', 'name: a-b\ndescription: 123', 'name: a-b\ndescription: true',
      'name: a-b\ndescription:', 'name: a-b', 'name: a-b\ndescription: x\nmetadata:\n  k: [1, 2]', 'name: a-b\nname: c\ndescription: x',
      'name: a-b\ndescription: ok # comment', 'name: a-b\ndescription: [a, b]', '- a', 'name: a-b\ndescription: >', `name: a-b\ndescription: ${'x'.repeat(1025)}`
    ].map(c => `---\n${c}\n---\nBody\n`)
    const py = `import json, sys; sys.path.insert(0, '/mnt/skills/public/skill-creator/scripts'); import skill_tool
for c in json.loads(sys.stdin.read()): print('ok' if not skill_tool.check_front_matter(c, None)[1] else 'no')`
    const got = (await sh(`python3 -c "${py.replace(/"/g, '\\"')}" <<'EOF'\n${JSON.stringify(cases)}\nEOF`)).trim().split('\n')
    t.same(got, cases.map(c => parseFrontMatter(c).ok ? 'ok' : 'no'))
  })
})
