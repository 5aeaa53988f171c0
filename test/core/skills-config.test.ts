import t from 'tap'
import { loadConfig } from '../../core/config.js'

// issue #16: the user skill cache as the Docker daemon sees it (the bind-mount sources)
t.test('SKILLS_CACHE_HOST_PATH: explicit, else moved along with DATA_DIR_HOST, else the cache dir', async t => {
  t.equal(loadConfig({ DATA_DIR: '/data' }).skillsCacheHostDir, '/data/skills-cache', 'default: below DATA_DIR')
  t.equal(loadConfig({ DATA_DIR: '/data/', DATA_DIR_HOST: '/srv/cubicle' }).skillsCacheHostDir, '/srv/cubicle/skills-cache', 'below DATA_DIR_HOST')
  t.equal(loadConfig({ DATA_DIR: '/data', DATA_DIR_HOST: '/srv/cubicle', SKILLS_CACHE_DIR: '/data/cache/skills' }).skillsCacheHostDir, '/srv/cubicle/cache/skills')
  t.equal(loadConfig({ DATA_DIR: '/data', DATA_DIR_HOST: '/srv/cubicle', SKILLS_CACHE_DIR: '/database/skills' }).skillsCacheHostDir, '/database/skills', 'a sibling with the same prefix is not below DATA_DIR')
  t.equal(loadConfig({ DATA_DIR: '/data', DATA_DIR_HOST: '/srv/cubicle', SKILLS_CACHE_HOST_PATH: '/mnt/cache' }).skillsCacheHostDir, '/mnt/cache', 'explicit wins')
})
