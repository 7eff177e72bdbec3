"""``subagent temporal dev`` and ``subagent temporal run``, as real processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import ledger
from subagent.temporal import ledger_name
from subagent.temporal._devserver import free_port


def write_specs(folder: Path) -> Path:
    replies = [
        {"tool_calls": [{"id": "c1", "name": "read_file", "arguments": {"path": "notes.txt"}}]},
        {"content": "read two lines", "usage": {"input_tokens": 7, "output_tokens": 3}},
    ]
    (folder / "replies.json").write_text(json.dumps(replies))
    (folder / "notes.txt").write_text("alpha\nbeta\n")
    specs = folder / "specs.toml"
    specs.write_text('[agents.helper]\nmodel = "scripted:replies.json"\ntools = ["read_file"]\n')
    return specs


def subagent(*args: str) -> list[str]:
    return [sys.executable, "-m", "subagent", *args]


@pytest.mark.slow
def test_dev_then_run(tmp_path: Path) -> None:
    specs = write_specs(tmp_path)
    port = free_port()
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    dev = subprocess.Popen(
        subagent("temporal", "dev", str(specs), "--port", str(port), "--db",
                 str(tmp_path / "t.sqlite"), "--ledger-dir", str(tmp_path / "ledgers")),
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )
    try:
        assert dev.stdout is not None
        db = tmp_path / "t.sqlite"
        first = dev.stdout.readline()
        assert first == f"temporal dev server on 127.0.0.1:{port} (state in {db})\n"
        assert dev.stdout.readline() == (
            f"worker on task queue 'subagent' at 127.0.0.1:{port}; Ctrl-C stops it\n"
        )
        done = subprocess.run(
            subagent("temporal", "run", str(specs), "--agent", "helper", "--id", "cli-1",
                     "--address", f"127.0.0.1:{port}", "summarise notes.txt"),
            cwd=tmp_path, capture_output=True, text=True, timeout=120,
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines()[:5] == [
            "workflow cli-1 started",
            "helper/0001: started",
            'helper/0001: calls read_file {"path": "notes.txt"}',
            "helper/0001: answered: read two lines",
            "helper/0001: done after 2 turns",
        ]
        assert done.stdout.endswith(
            "output:\nread two lines\n\nusage of the whole tree: 7 input + 3 output tokens; "
            f"17 events; ledger {ledger_name('cli-1')} in the worker's ledger directory\n"
        )
    finally:
        dev.send_signal(signal.SIGINT)
        rest, errors = dev.communicate(timeout=30)
    assert dev.returncode == 0, errors
    assert rest == ""
    report = ledger.verify(tmp_path / "ledgers" / ledger_name("cli-1"))
    assert report.ok and report.entries > 0


@pytest.mark.slow
def test_run_with_an_unknown_agent_exits_2(tmp_path: Path) -> None:
    specs = write_specs(tmp_path)
    done = subprocess.run(
        subagent("temporal", "run", str(specs), "--agent", "nobody", "x",
                 "--address", f"127.0.0.1:{free_port()}"),
        cwd=tmp_path, capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr == "subagent: unknown agent 'nobody'; registered agents: helper\n"


@pytest.mark.slow
def test_run_without_a_server_exits_2(tmp_path: Path) -> None:
    specs = write_specs(tmp_path)
    port = free_port()
    done = subprocess.run(
        subagent("temporal", "run", str(specs), "--agent", "helper", "x",
                 "--address", f"127.0.0.1:{port}"),
        cwd=tmp_path, capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr == f"subagent: cannot reach a Temporal server at 127.0.0.1:{port}\n"


@pytest.mark.parametrize("address", ["127.0.0.1:99999", "999.999.1.1:7233", ":::::"])
def test_a_malformed_address_is_one_line_and_2(
    address: str, capsys: pytest.CaptureFixture[str],
) -> None:
    # The SDK refuses it with a ValueError: "unexpected error: ValueError: invalid
    # target URL: ...", exit 1.
    import io

    from subagent._cli._cli import main

    assert main(["temporal", "pending", "wf", "--address", address], out=io.StringIO()) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"subagent: not a Temporal server address: {address!r}: ")
    assert err.count("\n") == 1
