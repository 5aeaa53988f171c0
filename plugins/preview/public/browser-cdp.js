// One CDP connection of the Browser view to a page, through /browser/{chat}/devtools/page/{id}:
// screencast frames shown in an <img> (each acknowledged once decoded, so a slow viewer slows the
// stream instead of queueing frames) and, while input is on, mouse, wheel and keyboard forwarded as
// Input.dispatch* events in the page's CSS pixels. Nothing here changes how the page renders.

const MODIFIERS = e => (e.altKey ? 1 : 0) | (e.ctrlKey ? 2 : 0) | (e.metaKey ? 4 : 0) | (e.shiftKey ? 8 : 0)
const BUTTONS = ['left', 'middle', 'right', 'back', 'forward']
const WHEEL_LINE = 40

/** The text a key produces (undefined for keys that produce none, and for shortcuts). */
function keyText (e) {
  if (e.ctrlKey || e.metaKey) return undefined
  if (e.key === 'Enter') return '\r'
  return e.key.length === 1 ? e.key : undefined
}

/** How long a new connection may go without its first screencast frame before it is dropped and made again. */
const FIRST_FRAME_MS = 15_000

export function connectPage (url, { screen, onLive, onUrl, onClose }) {
  const ws = new WebSocket(url)
  let nextId = 1
  let meta = null
  let frames = 0
  let inputOn = false
  let closed = false
  let moveQueued = null
  const send = (method, params = {}) => {
    if (ws.readyState !== WebSocket.OPEN) return
    ws.send(JSON.stringify({ id: nextId++, method, params }))
  }

  // A connection that opened but never delivers a first frame (a page of a browser still starting after a
  // sandbox restart, a relay that stalled) would hold the view on "Connecting…" for ever: the view retries
  // only when the socket ends. Closed after FIRST_FRAME_MS without a frame, it reconnects through onClose.
  const firstFrame = setTimeout(() => { if (frames === 0 && !closed) ws.close(4000, 'no frame') }, FIRST_FRAME_MS)

  ws.addEventListener('open', () => {
    const dpr = window.devicePixelRatio || 1
    const stage = screen.parentElement
    send('Page.enable')
    send('Page.startScreencast', {
      format: 'jpeg',
      quality: 70,
      maxWidth: Math.max(640, Math.round(stage.clientWidth * dpr)),
      maxHeight: Math.max(480, Math.round(stage.clientHeight * dpr)),
      everyNthFrame: 1
    })
  })

  ws.addEventListener('message', event => {
    if (typeof event.data !== 'string') return
    let msg
    try { msg = JSON.parse(event.data) } catch { return }
    if (msg.method === 'Page.screencastFrame') {
      const { data, metadata, sessionId } = msg.params
      meta = metadata
      screen.src = `data:image/jpeg;base64,${data}`
      screen.decode().catch(() => {}).finally(() => { send('Page.screencastFrameAck', { sessionId }) })
      frames++
      screen.dataset.frames = String(frames)
      if (frames === 1) onLive()
    } else if (msg.method === 'Page.frameNavigated' && msg.params?.frame?.parentId === undefined) {
      onUrl(String(msg.params.frame.url ?? ''))
    }
  })

  ws.addEventListener('close', () => {
    clearTimeout(firstFrame)
    closed = true
    setInput(false)
    onClose()
  })

  /** Viewer coordinates → the page's CSS pixels, from the shown frame's size and the frame's metadata. */
  function point (e) {
    const r = screen.getBoundingClientRect()
    if (meta === null || r.width === 0 || r.height === 0) return null
    return {
      x: Math.round((e.clientX - r.left) * meta.deviceWidth / r.width),
      y: Math.round((e.clientY - r.top) * meta.deviceHeight / r.height)
    }
  }

  function mouse (type, e, extra = {}) {
    const p = point(e)
    if (p === null) return
    send('Input.dispatchMouseEvent', { type, ...p, modifiers: MODIFIERS(e), buttons: e.buttons, ...extra })
  }

  const handlers = {
    mousedown: e => {
      e.preventDefault()
      screen.focus()
      mouse('mousePressed', e, { button: BUTTONS[e.button] ?? 'none', clickCount: e.detail || 1 })
    },
    mouseup: e => { e.preventDefault(); mouse('mouseReleased', e, { button: BUTTONS[e.button] ?? 'none', clickCount: e.detail || 1 }) },
    mousemove: e => {
      // At most one move per animation frame.
      if (moveQueued === null) requestAnimationFrame(() => { mouse('mouseMoved', moveQueued); moveQueued = null })
      moveQueued = e
    },
    wheel: e => {
      e.preventDefault()
      const scale = e.deltaMode === 1 ? WHEEL_LINE : e.deltaMode === 2 ? (meta?.deviceHeight ?? 800) : 1
      mouse('mouseWheel', e, { deltaX: e.deltaX * scale, deltaY: e.deltaY * scale })
    },
    contextmenu: e => { e.preventDefault() },
    keydown: e => {
      e.preventDefault()
      const text = keyText(e)
      send('Input.dispatchKeyEvent', {
        type: text === undefined ? 'rawKeyDown' : 'keyDown',
        modifiers: MODIFIERS(e),
        key: e.key,
        code: e.code,
        windowsVirtualKeyCode: e.keyCode,
        nativeVirtualKeyCode: e.keyCode,
        autoRepeat: e.repeat,
        location: e.location,
        isKeypad: e.location === 3,
        ...(text === undefined ? {} : { text, unmodifiedText: text })
      })
    },
    keyup: e => {
      e.preventDefault()
      send('Input.dispatchKeyEvent', { type: 'keyUp', modifiers: MODIFIERS(e), key: e.key, code: e.code, windowsVirtualKeyCode: e.keyCode, nativeVirtualKeyCode: e.keyCode, location: e.location })
    },
    paste: e => {
      e.preventDefault()
      const text = e.clipboardData?.getData('text/plain') ?? ''
      if (text !== '') send('Input.insertText', { text })
    }
  }

  function setInput (on) {
    const want = on && !closed
    if (want === inputOn) return
    inputOn = want
    for (const [name, fn] of Object.entries(handlers)) {
      if (want) screen.addEventListener(name, fn, { passive: false })
      else screen.removeEventListener(name, fn)
    }
    screen.classList.toggle('controlling', want)
  }

  return {
    id: null,
    setInput,
    close () {
      if (closed) return
      closed = true
      setInput(false)
      // Stopping the screencast first is polite; closing the socket ends the session (and with it
      // every per-session setting) in the browser anyway.
      send('Page.stopScreencast')
      ws.close(1000, 'viewer closed')
    }
  }
}
