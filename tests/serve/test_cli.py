"""``subagent serve SPECS``: the command serves the specs file's agents; the URL with
its token is printed once; a write waits for an approval given over HTTP; Ctrl-C
stops it (130); the ledger records the answer with who gave it."""

from __future__ import annotations

import argparse
import gc
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import trio

import ledger
from subagent.serve._cli import add_serve, run_serve

from ._served import wait_for

SPECS = ('[agents.helper]\ndescription = "Writes."\nmodel = "scripted:replies.json"\n'
         'tools = ["write_file"]\n')


def _files(folder: Path) -> None:
    call = {"id": "c1", "name": "write_file",
            "arguments": json.dumps({"path": "note.txt", "content": "from the page"})}
    (folder / "replies.json").write_text(json.dumps([{"tool_calls": [call]},
                                                     {"content": "written"}]))
    (folder / "specs.toml").write_text(SPECS)


@pytest.mark.slow
async def test_serve_command_approve_over_http_then_ctrl_c(tmp_path: Path) -> None:
    _files(tmp_path)
    env = {k: v for k, v in os.environ.items() if k != "SUBAGENT_SERVE_TOKEN"}
    proc = await trio.lowlevel.open_process(
        [sys.executable, "-m", "subagent", "serve", "specs.toml", "--port", "0",
         "--ledger", "l.jsonl", "--checkpoints", "c.db", "--workspace", "."],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    assert proc.stdout is not None and proc.stderr is not None
    try:
        printed = b""
        with trio.fail_after(30):
            while printed.count(b"\n") < 3:
                printed += await proc.stdout.receive_some(4096)
        lines = printed.decode().splitlines()
        assert lines[0].startswith("subagent serve: http://127.0.0.1:")
        url = lines[0].removeprefix("subagent serve: ").rstrip("/")
        assert lines[1].startswith(f"  open {url}/#token=")
        token = lines[1].split("#token=")[1]
        assert len(token) >= 32
        assert lines[2] == "  ledger: l.jsonl"
        async with httpx.AsyncClient(base_url=url, timeout=30,
                                     headers={"Authorization": f"Bearer {token}"}) as client:
            created = await client.post("/api/tasks", json={"agent": "helper", "text": "go"})
            assert created.status_code == 201
            waiting = await wait_for(client, "/api/approvals", lambda d: d["approvals"])
            assert waiting["approvals"][0]["tool"] == "write_file"
            assert not (tmp_path / "note.txt").exists()
            await client.post("/api/approvals/approve", json={
                "tree": "helper/0001", "call_id": "c1", "by": "erin"})
            done = await wait_for(client, "/api/tasks/helper/0001",
                                  lambda d: d["status"] == "finished")
            assert done["output"] == "written"
        assert (tmp_path / "note.txt").read_text() == "from the page"
        proc.send_signal(signal.SIGINT)
        with trio.fail_after(30):
            code = await proc.wait()
        rest = b""
        while chunk := await proc.stdout.receive_some(4096):
            rest += chunk
        assert token.encode() not in rest  # printed once
        errors = await proc.stderr.receive_some(65536)
        assert code == 130, errors
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert ledger.verify(tmp_path / "l.jsonl").ok
    answers = ledger.query(tmp_path / "l.jsonl", kind="approval")
    assert [(e.call_id, e.verdict, dict(e.data)) for e in answers] == [
        ("c1", "allow", {"by": "erin"})]


def test_a_short_token_from_the_environment_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    _files(tmp_path)
    monkeypatch.setenv("SUBAGENT_SERVE_TOKEN", "short")
    parser = argparse.ArgumentParser()
    add_serve(parser.add_subparsers())
    args = parser.parse_args(["serve", str(tmp_path / "specs.toml"), "--port", "0",
                              "--ledger", str(tmp_path / "l.jsonl")])
    code = run_serve(args, sys.stdout)
    assert code == 2
    assert capsys.readouterr().err == (
        "subagent: the token must be at least 16 printable ASCII characters\n")


def _serve_args(tmp_path: Path, *more: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_serve(parser.add_subparsers())
    return parser.parse_args(["serve", str(tmp_path / "specs.toml"),
                              "--ledger", str(tmp_path / "l.jsonl"), *more])


def test_a_port_in_use_is_one_line_and_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    # The bind error came out of Hypercorn's nurseries as a group: "unexpected error:
    # OSError: [Errno 98] Address already in use", exit 1.
    import socket

    _files(tmp_path)
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        code = run_serve(_serve_args(tmp_path, "--port", str(port)), sys.stdout)
    gc.collect()  # a socket left open by the failed bind warns now, in this test
    assert (code, capsys.readouterr().err) == (
        2, f"subagent: cannot listen on 127.0.0.1:{port}: Address already in use\n")


def test_a_port_out_of_range_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as info:
        _serve_args(tmp_path, "--port", "70000")
    assert info.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1].endswith(
        "argument --port: a port is 0 to 65535, not '70000'")


@pytest.mark.slow
def test_an_unreadable_checkpoint_file_ends_the_command(tmp_path: Path) -> None:
    # Recovery's CheckpointError reached the ASGI lifespan inside a group, which the
    # app did not catch: Hypercorn went on "without Lifespan support", the URL was
    # printed and every API request answered 503, for ever.
    _files(tmp_path)
    (tmp_path / "c.db").write_bytes(b"not a database" * 100)
    done = subprocess.run(
        [sys.executable, "-m", "subagent", "serve", "specs.toml", "--port", "0",
         "--ledger", "l.jsonl", "--checkpoints", "c.db"],
        cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])})
    assert (done.returncode, done.stdout, done.stderr) == (
        2, "", "subagent: cannot open the checkpoint database: file is not a database\n")
