"""The stdio server's supervisor (Linux): a small process that starts the server as
its child and, when the server ends or is to be stopped, kills every process the
server left behind, including those that left its session (``setsid()``) or lost
their parent (a double fork). It is a child subreaper (``PR_SET_CHILD_SUBREAPER``),
so every orphan of the server's tree is reparented to it, never to init; the process
that runs the pool is left as it is.

Run as a script by :mod:`._stdio`, with the interpreter in isolated mode and without
``site`` (``python -I -S _reaper.py STATUS_FD GRACE -- COMMAND ARGS...``): it imports
only the standard library, never ``subagent``. The server inherits its stdin, stdout
and stderr; it keeps only stdin (never read: its end says that the pool has closed
it or died).

- It writes ``ok`` to ``STATUS_FD`` once the command runs, or the ``errno`` of the
  failed ``exec``, then closes it (and exits with code 127 on failure).
- The server exits: every process left in its tree gets SIGKILL and is reaped, then
  the supervisor exits as the server did (with its code, or by its signal), so the
  pool sees the server's own exit status.
- Stdin reaches its end (the pool closed it, or the pool's process died, SIGKILL
  included): ``GRACE`` seconds later the tree gets SIGTERM, as on a SIGTERM to the
  supervisor; ``GRACE`` seconds after that, SIGKILL as above.

The server is started with ``PR_SET_PDEATHSIG`` (SIGKILL): it dies with the
supervisor, if that is killed outright. Nothing is guaranteed about a process that
escapes the tree through another service (a ``systemd-run``, an ``at`` job).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import resource
import select
import signal
import sys
import time

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36


def _parent(pid: int) -> int | None:
    # The parent's pid from /proc/PID/stat; None once the process is gone.
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            stat = file.read()
    except OSError:
        return None
    # "pid (comm) state ppid ...": comm may hold spaces and parentheses.
    return int(stat.rsplit(b")", 1)[1].split()[1])


def descendants(root: int) -> list[int]:
    """The pids of every process below ``root`` (zombies included), parents first,
    from the parent links in ``/proc``."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            parent = _parent(int(entry))
            if parent is not None:
                children.setdefault(parent, []).append(int(entry))
    found: list[int] = []
    todo = [root]
    while todo:
        for pid in children.get(todo.pop(), ()):
            found.append(pid)
            todo.append(pid)
    return found


def signal_tree(sig: int) -> None:
    """Send ``sig`` to every process below this one."""
    me = os.getpid()
    tree = descendants(me)
    mine = {me, *tree}
    for pid in tree:
        # Through a pidfd, checked to be still below us once held: a pid that was
        # reaped and reused since /proc was read is never signalled.
        try:
            fd = os.pidfd_open(pid)
        except ProcessLookupError:
            continue
        except OSError:  # no pidfds in this kernel
            with contextlib.suppress(OSError):
                os.kill(pid, sig)
            continue
        try:
            if _parent(pid) in mine:
                signal.pidfd_send_signal(fd, sig)
        except OSError:
            pass
        finally:
            os.close(fd)


class Supervisor:
    """The state of one supervised server: its pid and, once reaped, its status."""

    def __init__(self, server: int) -> None:
        self.server = server
        self.status: int | None = None

    def reap(self) -> bool:
        """Reap every child that has ended; whether any child is left. Not blocking."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return False
            if pid == 0:
                return True
            if pid == self.server:
                self.status = status

    def kill_all(self, wake: int) -> None:
        """SIGKILL the whole tree until no child is left, reaping as they end. A
        process forked while this runs is orphaned to us and found on the next round."""
        while self.reap():
            signal_tree(signal.SIGKILL)
            # Woken by SIGCHLD, or a round every 10 ms.
            select.select([wake], [], [], 0.01)
            with contextlib.suppress(BlockingIOError):
                os.read(wake, 512)

    def exit(self) -> None:
        """Exit as the server did."""
        status = self.status if self.status is not None else 0
        if os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            with contextlib.suppress(OSError, ValueError):
                resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
                signal.signal(sig, signal.SIG_DFL)  # not for SIGKILL: it needs none
            os.kill(os.getpid(), sig)
            os._exit(128 + sig)
        os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 1)


def _start(argv: list[str], status_fd: int, prctl: object) -> int:
    # Fork and exec the server; tell the pool whether the exec worked.
    failed, failing = os.pipe()  # both close on exec
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(failed)
            os.close(status_fd)
            for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGPIPE, signal.SIGXFSZ):
                signal.signal(sig, signal.SIG_DFL)
            signal.set_wakeup_fd(-1)
            if callable(prctl):
                prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL))
            if os.getppid() != parent:
                os._exit(1)
            os.execvp(argv[0], argv)
        except OSError as exc:
            os.write(failing, str(exc.errno or 0).encode())
        finally:
            os._exit(127)
    os.close(failing)
    errno = b""
    while chunk := os.read(failed, 64):
        errno += chunk
    os.close(failed)
    with contextlib.suppress(OSError):
        os.write(status_fd, errno or b"ok")
    os.close(status_fd)
    if errno:
        os.waitpid(pid, 0)
        os._exit(127)
    return pid


def main(argv: list[str]) -> None:
    """Supervise ``argv`` (``STATUS_FD GRACE -- COMMAND ARGS...``) until it ends."""
    status_fd, grace, command = int(argv[0]), float(argv[1]), argv[3:]
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
        prctl(_PR_SET_CHILD_SUBREAPER, 1)
    except (OSError, AttributeError):
        prctl = None
    wake, woken = os.pipe()
    os.set_blocking(wake, False)
    os.set_blocking(woken, False)
    signal.set_wakeup_fd(woken, warn_on_full_buffer=False)
    for sig in (signal.SIGCHLD, signal.SIGTERM):
        signal.signal(sig, lambda signum, frame: None)
    supervisor = Supervisor(_start(command, status_fd, prctl))
    # Stdout and stderr are the server's alone: their ends come when its tree ends.
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 1)
    os.dup2(null, 2)
    os.close(null)

    poll = select.poll()
    poll.register(wake, select.POLLIN)
    poll.register(0, 0)  # only its end (POLLHUP, POLLERR): never read
    stage, deadline = 0, float("inf")  # 0 runs, 1 stdin ended, 2 SIGTERM sent
    while supervisor.reap() and supervisor.status is None:
        now = time.monotonic()
        if now >= deadline:
            if stage == 2:
                break
            stage, deadline = 2, now + grace
            signal_tree(signal.SIGTERM)
            continue
        timeout = None if deadline == float("inf") else max(0, deadline - now) * 1000
        for fd, _ in poll.poll(timeout):
            if fd == 0:
                poll.unregister(0)
                if stage == 0:
                    stage, deadline = 1, time.monotonic() + grace
                continue
            with contextlib.suppress(BlockingIOError):
                signals = os.read(wake, 512)
                if signal.SIGTERM in signals and stage < 2:
                    stage, deadline = 2, time.monotonic() + grace
                    signal_tree(signal.SIGTERM)
    supervisor.kill_all(wake)
    supervisor.exit()


if __name__ == "__main__":
    main(sys.argv[1:])
