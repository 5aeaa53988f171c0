// Types the browser shows by itself, straight from the file's URL: nothing is parsed in the page.
import { el } from '../dom.js'

export const image = file => el('div', { className: 'media image' }, [el('img', { src: file.url, alt: file.name })])
export const audio = file => el('div', { className: 'media audio' }, [el('audio', { src: file.url, controls: '', preload: 'metadata' })])
export const video = file => el('div', { className: 'media video' }, [el('video', { src: file.url, controls: '', preload: 'metadata', playsinline: '' })])
export const pdf = file => el('iframe', { className: 'frame pdf-frame', src: file.url, title: file.name })
// Opaque origin: the agent's page may run script but can never read our origin's storage or the token.
export const html = file => el('iframe', { className: 'frame html-frame', src: file.url, title: file.name, sandbox: 'allow-scripts allow-forms allow-popups', referrerpolicy: 'no-referrer' })
