#!/usr/lib/cubicle-agent/python3 -I -S
# cubicle-agent: the in-sandbox agent's launcher (the agent itself, its protocol included, is
# cubicle_agent.py). Started by the image's entrypoint with --connect PATH (the engine's Unix socket),
# or by the server through a long-lived `docker exec -i` (stdin/stdout): docs/engine.md#the-agent-socket.
#
# Hardening, before anything else is imported: the server runs this file with a root-owned
# interpreter that `assistant` cannot read, so the kernel starts it non-dumpable, and with -I -S, so
# that only the root-owned standard library is importable (no PYTHON* variable, no user or site
# directory, no .pth file). Started any other way, the lines below make the process non-dumpable
# (prctl PR_SET_DUMPABLE 0) and refuse to run if that fails: no other `assistant` process may ptrace
# the agent or open its /proc/<pid>/fd or mem to write frames in its name or read its key. They can
# still kill it: the server then starts one over docker exec.
#
# The start is on a new chat's first call (docs/performance.md), so it imports only what it needs:
# the kernel shows whether the process is non-dumpable already (it then makes /proc/<pid>/fd root's
# instead of the process's own user), and only otherwise is ctypes (a tenth of the start) loaded for
# the prctl; ssl, which asyncio imports when it can for TLS transports the agent never uses, is kept
# out (asyncio runs without it); the agent's modules are compiled at the image's build, root's and
# read-only (/opt/cubicle-agent/__pycache__), except this file, which python compiles at each start
# and which is therefore kept small.
import os
import sys


def _non_dumpable():
    # A dumpable process's /proc/<pid>/fd is its effective user's.
    euid = os.geteuid()
    try:
        return euid != 0 and os.stat('/proc/self/fd').st_uid != euid
    except OSError:
        return False


if not _non_dumpable():
    import ctypes
    _libc = ctypes.CDLL(None, use_errno=True)
    if _libc.prctl(4, 0, 0, 0, 0) != 0 or _libc.prctl(3, 0, 0, 0, 0) != 0:  # PR_SET_DUMPABLE 0, then PR_GET_DUMPABLE
        sys.stderr.write('cubicle-agent: cannot make the process non-dumpable\n')
        sys.exit(2)
    del _libc

sys.modules['ssl'] = None
sys.path.append(os.path.dirname(os.path.abspath(__file__)))
from cubicle_agent import run  # noqa: E402

if __name__ == '__main__':
    run(sys.argv[1:])
