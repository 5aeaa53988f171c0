import Type, { type Static } from 'typebox'

export const TierToolDescriptionsOptions = Type.Object({
  tools: Type.Optional(Type.Array(Type.String({ minLength: 1 }), { default: ['bash_tool', 'view'], description: 'Tools whose description gets the hint' })),
  hint: Type.Optional(Type.String({
    minLength: 1,
    default: 'If you have lost track of your environment (this chat\'s id, the public URLs of your files, the available skills), read /home/assistant/README.md again.'
  }))
})
export type TierToolDescriptionsOptions = Static<typeof TierToolDescriptionsOptions>
