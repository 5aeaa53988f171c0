import t from 'tap'
import { loadConfig } from '../../core/config.js'

// the user skill cache as the Docker daemon sees it (the bind-mount sources)
t.test('SKILLS_CACHE_HOST_PATH: explicit, else moved along with DATA_DIR_HOST, else the cache dir', async t => {
  t.equal(loadConfig({ DATA_DIR: '/data' }).skillsCacheHostDir, '/data/skills-cache', 'default: below DATA_DIR')
  t.equal(loadConfig({ DATA_DIR: '/data/', DATA_DIR_HOST: '/srv/cubicle' }).skillsCacheHostDir, '/srv/cubicle/skills-cache', 'below DATA_DIR_HOST')
  t.equal(loadConfig({ DATA_DIR: '/data', DATA_DIR_HOST: '/srv/cubicle', SKILLS_CACHE_DIR: '/data/cache/skills' }).skillsCacheHostDir, '/srv/cubicle/cache/skills')
  t.equal(loadConfig({ DATA_DIR: '/data', DATA_DIR_HOST: '/srv/cubicle', SKILLS_CACHE_DIR: '/database/skills' }).skillsCacheHostDir, '/database/skills', 'a sibling with the same prefix is not below DATA_DIR')
  t.equal(loadConfig({ DATA_DIR: '/data', DATA_DIR_HOST: '/srv/cubicle', SKILLS_CACHE_HOST_PATH: '/mnt/cache' }).skillsCacheHostDir, '/mnt/cache', 'explicit wins')
})

t.test('MCP_TOKENS_URL_ALLOW: http(s) origins only, normalised; anything else stops the boot naming the setting', async t => {
  t.same(loadConfig({}).mcpTokensUrlAllow, [])
  t.same(loadConfig({ MCP_TOKENS_URL_ALLOW: ' https://Settings.Example:443/ , http://10.0.0.5:8080 ' }).mcpTokensUrlAllow, ['https://settings.example', 'http://10.0.0.5:8080'])
  for (const bad of ['settings.example', 'https://settings.example/api', 'https://u@settings.example', 'https://settings.example?x=1', 'ftp://settings.example', 'https://']) {
    t.throws(() => loadConfig({ MCP_TOKENS_URL_ALLOW: bad }), { code: 'CORE_INVALID_CONFIG', message: /MCP_TOKENS_URL_ALLOW/ }, bad)
  }
})

t.test('SKILLS_CACHE_MAX_BYTES: 1 GiB by default, with size suffixes', async t => {
  t.equal(loadConfig({}).SKILLS_CACHE_MAX_BYTES, 1073741824)
  t.equal(loadConfig({ SKILLS_CACHE_MAX_BYTES: '200m' }).SKILLS_CACHE_MAX_BYTES, 200 * 1024 * 1024)
  t.throws(() => loadConfig({ SKILLS_CACHE_MAX_BYTES: '0' }), { code: 'CORE_INVALID_CONFIG' })
})
