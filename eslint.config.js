// Lint: neostandard (the Fastify org's formatting) plus the module boundaries of
// docs/conventions.md#how-plugins-talk: a plugin imports another plugin only as `import type` from its types.ts, and core/ never
// imports plugins/. Run by `npm run lint`, which `npm test` runs first.
import neostandard from 'neostandard'
import globals from 'globals'

const otherPluginFiles = {
  regex: '^\\.\\./(?!\\.\\./)[^/]+/(?!types\\.js$)',
  message: 'a plugin imports another plugin only through its types.ts (docs/conventions.md#how-plugins-talk)'
}
const otherPluginTypes = {
  regex: '^\\.\\./(?!\\.\\./)[^/]+/types\\.js$',
  allowTypeImports: true,
  message: 'another plugin\'s types.ts is imported with `import type` only (docs/conventions.md#how-plugins-talk)'
}
const pluginsFromCore = {
  regex: '(^|/)plugins/',
  message: 'core/ never imports plugins/ (docs/conventions.md#how-plugins-talk); take the service from the Fastify instance'
}

export default [
  ...neostandard({ ts: true, ignores: ['node_modules/**', 'test/conformance/**', 'sandbox-image/**/node_modules/**', 'dist/**'] }),
  {
    rules: {
      // TypeBox's idiom declares a schema and its static type under one name (docs/conventions.md#naming-and-size).
      '@typescript-eslint/no-redeclare': 'off',
      // `void promise` marks a promise deliberately not awaited (a background task that handles its own errors).
      'no-void': ['error', { allowAsStatement: true }],
      // Shell scripts, env placeholders and config templates are written as plain strings on purpose.
      'no-template-curly-in-string': 'off',
      // Loops that wait for a flag set by an event handler or another async task: the rule cannot see those writes.
      'no-unmodified-loop-condition': 'off'
    }
  },
  {
    files: ['plugins/*/public/**/*.js'],
    languageOptions: { globals: { ...globals.browser, ...globals.worker } }
  },
  {
    files: ['plugins/*/*.ts'],
    rules: { '@typescript-eslint/no-restricted-imports': ['error', { patterns: [otherPluginFiles, otherPluginTypes] }] }
  },
  {
    files: ['core/**/*.ts'],
    ignores: ['core/server.ts'],
    rules: { '@typescript-eslint/no-restricted-imports': ['error', { patterns: [pluginsFromCore] }] }
  }
]
