# The agent's way in over the engine's Unix socket (cubicle-agent.py --connect PATH), imported by
# cubicle-agent.py after its hardening. The engine listens on PATH, in a directory it bind-mounts
# read-only into the sandbox (docs/engine.md#the-agent-socket); the agent connects, shakes hands,
# serves the framed protocol, and connects again whenever that stream ends (the server restarted, or
# closed it), backing off while nobody listens.
#
# The handshake, before any frame: the engine sends MAGIC and a 32-byte nonce; the agent answers
# 'F' + 32 zero bytes (fresh: it holds no key yet) or 'R' + HMAC-SHA256(key, nonce); the engine
# answers 'K' + a new 32-byte key (to a fresh agent, accepted only right after the sandbox started,
# before anything else ran in it) or 'O' + 32 zero bytes, or closes the stream. The key lives only in
# this non-dumpable process's memory (and on the host, outside the mount), so no other `assistant`
# process can pose as a fresh agent (too late) or resume one (no key).
import asyncio

MAGIC = b'CUBA\x01'
NONCE = 32
HANDSHAKE_S = 10
RETRY_MIN, RETRY_MAX = 0.02, 2.0


async def handshake(reader, writer, key):
    # The key to keep from now on, or None when the engine refused (it then closed the stream).
    greeting = await asyncio.wait_for(reader.readexactly(len(MAGIC) + NONCE), HANDSHAKE_S)
    if greeting[:len(MAGIC)] != MAGIC:
        return None
    nonce = greeting[len(MAGIC):]
    if key is None:
        proof = bytes(NONCE)
    else:
        # imported here: the first handshake (on the sandbox's start) needs no hash
        import hashlib
        import hmac
        proof = hmac.new(key, nonce, hashlib.sha256).digest()
    writer.write((b'F' if key is None else b'R') + proof)
    await writer.drain()
    verdict = await asyncio.wait_for(reader.readexactly(1 + NONCE), HANDSHAKE_S)
    if key is None and verdict[:1] == b'K':
        return verdict[1:]
    if key is not None and verdict[:1] == b'O':
        return key
    return None


async def connect_loop(path, limit, serve):
    # Connects, shakes hands, serves, and again whenever the stream ends (the server restarted, or
    # closed it): the engine answers the same socket path. Backs off while nobody listens.
    key = None
    delay = RETRY_MIN
    while True:
        writer = None
        try:
            reader, writer = await asyncio.open_unix_connection(path, limit=limit)
            got = await handshake(reader, writer, key)
            if got is not None:
                key = got
                delay = RETRY_MIN
                await serve(reader, writer)
        except (OSError, EOFError, asyncio.IncompleteReadError, asyncio.TimeoutError):
            pass
        finally:
            if writer is not None:
                writer.close()
        await asyncio.sleep(delay)
        delay = min(delay * 2, RETRY_MAX)
