"""A stdio MCP server whose helpers leave its process group before it starts serving.

``escaping_server.py PIDFILE`` starts two processes that run until killed, then
becomes the fixture server (``exec``): one child that calls ``setsid()`` (a new session
and process group; it ignores SIGTERM) and one daemon started by a double fork (its
parent exits, so it is reparented). Their stdio is ``/dev/null``. Once both are in
their new sessions it writes their pids to PIDFILE, one a line, child first.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

FIXTURE = str(Path(__file__).with_name("fixture_server.py"))


def _linger(ready: int) -> None:
    # In a new session: say so through the pipe, leave the server's stdio, run on.
    os.setsid()
    os.write(ready, f"{os.getpid()}\n".encode())
    os.close(ready)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    while True:
        time.sleep(3600)


def main() -> None:
    pidfile = Path(sys.argv[1])
    read, ready = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(read)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        _linger(ready)
    middle = os.fork()
    if middle == 0:
        os.close(read)
        os.setsid()
        if os.fork() == 0:
            _linger(ready)
        os._exit(0)
    os.close(ready)
    os.waitpid(middle, 0)
    pids = b""
    while chunk := os.read(read, 64):
        pids += chunk
    os.close(read)
    child_pid = str(child).encode()
    lines = sorted(pids.split(), key=lambda pid: pid != child_pid)
    pidfile.write_bytes(b"\n".join(lines) + b"\n")
    os.execv(sys.executable, [sys.executable, FIXTURE])


if __name__ == "__main__":
    main()
