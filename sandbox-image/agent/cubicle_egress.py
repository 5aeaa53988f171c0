# cubicle_egress: the sandbox's way out when it has no network interface (docs/network.md#egress-over-the-agent-socket),
# imported by cubicle_agent.py only when the server asked for it (CUBICLE_EGRESS_PORT in the sandbox's
# environment). The agent listens on 127.0.0.1:<port> (and [::1]:<port> when the loopback has IPv6; never
# beyond loopback) and relays every accepted connection, as bytes, to the engine's Unix socket
# (/run/cubicle-agent/egress.sock, in the directory the engine bind-mounts read-only into this sandbox
# only): the server's egress proxy answers there, so HTTP CONNECT, plain HTTP and SOCKS5 pass unchanged,
# and the chat is known from which sandbox's socket the connection came through, never from these bytes.
#
# Bounded: at most MAX_CONNS connections at once (more are closed at accept), each direction read
# CHUNK at a time and written with the transport's drain (backpressure: a slow side holds the other
# back, about 4 * CHUNK per connection in buffers). A half-close passes through (write_eof), the
# connection ends once both directions ended or either side failed. While the port is taken (another
# agent of this sandbox relays already, or a process holds it) binding is tried again every RETRY_S.
import asyncio
import os

SOCKET = '/run/cubicle-agent/egress.sock'
MAX_CONNS = 128
CHUNK = 64 * 1024
RETRY_S = 2.0

_state = {'conns': 0, 'servers': [], 'retry': None}


async def _pump(reader, writer):
    # One direction, until EOF (passed on as a half-close) or a failure (raised: the caller closes both).
    while True:
        data = await reader.read(CHUNK)
        if not data:
            break
        writer.write(data)
        await writer.drain()
    if writer.can_write_eof():
        writer.write_eof()


async def _relay(client_r, client_w, path):
    _state['conns'] += 1
    up_w = None
    try:
        try:
            up_r, up_w = await asyncio.open_unix_connection(path, limit=CHUNK)
        except OSError:
            return
        for w in (client_w, up_w):
            w.transport.set_write_buffer_limits(high=CHUNK)
        tasks = [asyncio.ensure_future(_pump(client_r, up_w)), asyncio.ensure_future(_pump(up_r, client_w))]
        try:
            # Both directions to their end; the first failure ends both.
            done, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        finally:
            for task in tasks:
                task.cancel()
        for task in done:
            if not task.cancelled():
                task.exception()
    finally:
        _state['conns'] -= 1
        for w in (client_w, up_w):
            if w is not None:
                try:
                    w.close()
                except Exception:  # noqa: BLE001
                    pass


def _handler(path):
    async def handle(reader, writer):
        if _state['conns'] >= MAX_CONNS:
            writer.close()
            return
        await _relay(reader, writer, path)
    return handle


async def _bind(port, path):
    # True once the IPv4 loopback listens (IPv6 loopback too when it exists).
    handle = _handler(path)
    try:
        _state['servers'].append(await asyncio.start_server(handle, '127.0.0.1', port, limit=CHUNK, backlog=64))
    except OSError:
        return False
    try:
        _state['servers'].append(await asyncio.start_server(handle, '::1', port, limit=CHUNK, backlog=64))
    except OSError:
        pass  # no IPv6 loopback (or ::1's port taken): IPv4 serves
    return True


async def _retry(port, path):
    while not await _bind(port, path):
        await asyncio.sleep(RETRY_S)


async def start(port_text, path=SOCKET):
    # Listens before the agent says HELLO (the first command finds the relay up); a taken port is tried
    # again in the background. A port that is not a number in 1..65535 turns the relay off.
    try:
        port = int(port_text)
    except ValueError:
        return
    if not 0 < port < 65536:
        return
    if not await _bind(port, path):
        _state['retry'] = asyncio.ensure_future(_retry(port, path))

