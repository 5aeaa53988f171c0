# TCP connections of cubicle-agent (CONNECT requests), imported by cubicle-agent.py after its hardening:
# a connection to an app listening on the sandbox's loopback (127.0.0.1, then ::1), spliced over the
# agent's framed stream, so that the server's app proxy needs no exec per connection.
#
# CONNECT (JSON: port, window) opens it: CONNECTED (JSON: family) or FAIL (JSON: errno, error) answers.
# Then STDIN frames carry the server's bytes to the app, and OUT frames the app's bytes to the server;
# CLOSE (server) or the app's end closes it, and EXIT (JSON: code null) is its last frame.
# Flow control both ways, per connection: the agent sends at most `window` bytes the server has not
# acknowledged (ACK: u32 bytes it consumed), and acknowledges what it wrote to the app (CREDIT: u32),
# so the server never sends more than `window` unwritten bytes either; more than that closes the
# connection. Credits go out a quarter of the window at a time: a small request costs no frame back
# (the server waits only when a whole window is unwritten, and by then three quarters of it are in the
# inbox, whose writing crosses the quarter). Nothing waits on another connection: a slow reader
# stalls only its own.
import asyncio
import struct

T_STDIN, T_CLOSE, T_ACK = 17, 19, 22
T_OUT, T_EXIT, T_FAIL, T_CONNECTED, T_CREDIT = 2, 4, 5, 8, 9
CHUNK = 256 * 1024
MIN_WINDOW, MAX_WINDOW = 64 * 1024, 4 * 1024 * 1024
# Connections open at once (all apps of the sandbox together); the server caps per chat far below.
MAX_CONNECTIONS = 256
CONNECT_TIMEOUT = 10.0
U32 = struct.Struct('>I')


class Connection:
    def __init__(self, agent, rid):
        self.agent = agent
        self.rid = rid
        self.writer = None
        # bytes the server may still receive before it acknowledges more
        self.room = 0
        self.room_changed = asyncio.Event()
        self.inbox = asyncio.Queue()
        self.queued = 0
        # written to the app, not credited yet (less than a quarter of the window)
        self.uncredited = 0
        self.window = MIN_WINDOW
        self.closed = asyncio.Event()

    def control(self, typ, payload):
        if typ == T_STDIN:
            self.queued += len(payload)
            if self.queued > self.window:
                # The server sent beyond the window: it is broken; end this connection.
                self.closed.set()
                return
            self.inbox.put_nowait(payload)
        elif typ == T_ACK:
            if len(payload) == 4:
                self.room = min(self.room + U32.unpack(payload)[0], self.window)
                self.room_changed.set()
        elif typ == T_CLOSE:
            self.closed.set()

    async def run(self, spec):
        try:
            port = spec['port']
            window = spec.get('window', MIN_WINDOW)
            if not isinstance(port, int) or not 1 <= port <= 65535 or not isinstance(window, int):
                raise ValueError('bad port or window')
        except (KeyError, TypeError, ValueError) as e:
            await self.agent.send_json(self.rid, T_FAIL, {'errno': 0, 'error': str(e)[:300]})
            return
        self.window = self.room = max(MIN_WINDOW, min(window, MAX_WINDOW))
        reader, writer, family, err = None, None, 0, None
        # 127.0.0.1 first, then ::1 (an app listening only on IPv6 loopback); the first refusal's errno is kept.
        for host, fam in (('127.0.0.1', 4), ('::1', 6)):
            try:
                reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port, limit=CHUNK), CONNECT_TIMEOUT)
                family = fam
                break
            except asyncio.TimeoutError:
                err = err or TimeoutError(110, 'Connection timed out')
            except OSError as e:
                err = err or e
        if writer is None:
            await self.agent.send_json(self.rid, T_FAIL, {'errno': getattr(err, 'errno', 0) or 0, 'error': (getattr(err, 'strerror', None) or str(err))[:300]})
            return
        self.writer = writer
        await self.agent.send_json(self.rid, T_CONNECTED, {'family': family})
        tasks = [asyncio.ensure_future(self.upstream(reader)), asyncio.ensure_future(self.downstream(writer)),
                 asyncio.ensure_future(self.closed.wait())]
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in tasks:
                task.cancel()
            writer.close()
            await self.agent.send_json(self.rid, T_EXIT, {'code': None})

    async def upstream(self, reader):
        # The app's bytes to the server, within the window the server granted.
        while True:
            while self.room <= 0:
                self.room_changed.clear()
                await self.room_changed.wait()
            data = await reader.read(min(CHUNK, self.room))
            if not data:
                return
            self.room -= len(data)
            await self.agent.send(self.rid, T_OUT, data)
            if self.agent.lost:
                return

    async def downstream(self, writer):
        # The server's bytes to the app; each write acknowledged once the app's socket took it.
        try:
            while True:
                data = await self.inbox.get()
                writer.write(data)
                await writer.drain()
                self.queued -= len(data)
                self.uncredited += len(data)
                if self.uncredited >= self.window // 4:
                    n, self.uncredited = self.uncredited, 0
                    await self.agent.send(self.rid, T_CREDIT, U32.pack(n))
        except (ConnectionError, OSError):
            return


async def open_connection(agent, rid, spec):
    # One CONNECT request: its Connection is registered for the server's frames while it lives.
    if rid in agent.conns or rid in agent.reqs or rid == 0:
        return
    conn = Connection(agent, rid)
    if len(agent.conns) >= MAX_CONNECTIONS:
        await agent.send_json(rid, T_FAIL, {'errno': 24, 'error': f'more than {MAX_CONNECTIONS} connections at once'})
        return
    agent.conns[rid] = conn
    try:
        await conn.run(spec)
    finally:
        agent.conns.pop(rid, None)
