"""``subagent resume`` refused (review4): a resume the pool refuses before it runs
anything (the specs given lack the approved call's tool) leaves the paused-run file
where it was, to be resumed with the right specs, instead of taking it (moved to
``FILE.resumed`` as a claim, then refused as resumed already)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .test_cli import run, write_specs
from .test_cli_pause import WRITE


@pytest.mark.slow
def test_a_refused_resume_leaves_the_paused_file(tmp_path: Path) -> None:
    specs = write_specs(tmp_path, [WRITE])
    paused = tmp_path / "paused.json"
    log = tmp_path / "l.jsonl"
    done = run("run", str(specs), "--agent", "helper", "write it", "--approve-later",
               str(paused), "--ledger", str(log), "--workspace", str(tmp_path), cwd=tmp_path)
    assert done.returncode == 4, done.stderr
    assert run("approve", str(paused), "c1", "--by", "alice", cwd=tmp_path).returncode == 0
    text = paused.read_text()
    narrow = tmp_path / "narrow.toml"
    narrow.write_text('[agents.helper]\nmodel = "scripted:replies.json"\n'
                      'tools = ["read_file"]\n')
    refused = run("resume", str(paused), str(narrow), "--ledger", str(log),
                  "--workspace", str(tmp_path), cwd=tmp_path)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert refused.stderr == (
        "subagent: tool 'write_file' of approved call 'c1' is not among this Agent's "
        "tools (read_file)\n")
    # Nothing ran and nothing was taken: the file is as it was.
    assert paused.read_text() == text
    assert not (tmp_path / "paused.json.resumed").exists()
    assert not (tmp_path / "out.txt").exists()
    (tmp_path / "replies.json").write_text(json.dumps([{"content": "wrote it"}]))
    done = run("resume", str(paused), str(specs), "--ledger", str(log),
               "--workspace", str(tmp_path), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "output:\nwrote it\n" in done.stdout
    assert (tmp_path / "out.txt").read_text() == "x"
    assert not paused.exists()
    claim = (tmp_path / "paused.json.resumed").read_text()
    assert claim.endswith(f',"state":{text}}}')
