import Type, { type Static } from 'typebox'

export const PreviewOptions = Type.Object({
  frameAncestors: Type.Optional(Type.String({ default: '*', description: 'FRAME_ANCESTORS: who may embed the preview page' })),
  publicDir: Type.Optional(Type.String({ default: '', description: 'front-end files; empty = plugins/preview/public of this install' }))
})
export type PreviewOptions = Static<typeof PreviewOptions>

/** The config the page reads from its `<script type="application/json" id="config">` block (§6.3 preview item 2). */
export interface PreviewConfig {
  chatId: string
  apiUrl: string
  filesBase: string
  scope: 'files' | 'full'
  token: string | null
}
