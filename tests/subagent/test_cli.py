"""The ``subagent`` command, run as a subprocess."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import ledger


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "subagent", *args],
        cwd=cwd, capture_output=True, text=True, timeout=120, check=False,
    )


def test_demo_exits_0_with_the_tree_and_a_verified_ledger(tmp_path: Path) -> None:
    path = tmp_path / "demo.jsonl"
    done = run("demo", "--ledger", str(path), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    # three subagents in parallel: all three start before the first one ends
    lines = out.splitlines()
    starts = [i for i, line in enumerate(lines) if line.endswith(": started")]
    first_end = min(i for i, line in enumerate(lines) if "done after" in line)
    assert len([i for i in starts if i < first_end]) == 4  # coordinator + three children
    assert out.count("coordinator/0001: result of ") == 3
    # (real-time pauses: a loaded machine may shift path numbers and turn counts)
    assert re.search(r"final tree:\n  coordinator/0001  done  turn [34]  ", out)
    assert re.search(r"\n      fact_checker/000[2-5]  done  turn 1  220 tok", out)
    assert "- researcher: Nothing outlives the block that started it" in out
    assert "- reader: 3 lines mention nurseries; the main idea: Structured concurrency" in out
    assert "- reviewer: Verifying the ledger after every run matters most" in out
    entries = int(re.findall(r"ledger verified: (\d+) entries, chain intact", out)[0])
    report = ledger.verify(path)
    assert (report.ok, report.entries) == (True, entries)


def test_demo_can_write_sqlite(tmp_path: Path) -> None:
    path = tmp_path / "demo.sqlite"
    done = run("demo", "--ledger", str(path), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert ledger.verify(path).format == "sqlite"


def write_specs(tmp_path: Path, replies: list[dict[str, object]], extra: str = "") -> Path:
    (tmp_path / "replies.json").write_text(json.dumps(replies))
    (tmp_path / "notes.txt").write_text("alpha\nbeta\n")
    specs = tmp_path / "specs.toml"
    specs.write_text(
        '[agents.helper]\ndescription = "helps"\nmodel = "scripted:replies.json"\n'
        'tools = ["read_file", "write_file"]\n' + extra
    )
    return specs


def test_run_with_a_scripted_replay_file(tmp_path: Path) -> None:
    specs = write_specs(tmp_path, [
        {"tool_calls": [{"id": "c1", "name": "read_file", "arguments": {"path": "notes.txt"}}]},
        {"tool_calls": [{"id": "c2", "name": "write_file",
                         "arguments": {"path": "out.txt", "content": "x"}}]},
        {"content": "read two lines", "usage": {"input_tokens": 7, "output_tokens": 3}},
    ])
    done = run("run", str(specs), "--agent", "helper", "summarise notes.txt",
               "--ledger", str(tmp_path / "l.jsonl"), "--workspace", str(tmp_path),
               cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "helper/0001: calls read_file" in done.stdout
    # the default gate allows read-only tools only
    assert "helper/0001: denied write_file: tool 'write_file' may change things" in done.stdout
    assert not (tmp_path / "out.txt").exists()
    assert "output:\nread two lines\n" in done.stdout
    assert "usage of the whole tree: 7 input + 3 output tokens over 1 runs" in done.stdout
    assert "ledger verified: " in done.stdout


def test_yes_allows_mutating_tools(tmp_path: Path) -> None:
    specs = write_specs(tmp_path, [
        {"tool_calls": [{"id": "c1", "name": "write_file",
                         "arguments": {"path": "out.txt", "content": "x"}}]},
        {"content": "wrote it"},
    ])
    done = run("run", str(specs), "--agent", "helper", "write", "--yes",
               "--ledger", str(tmp_path / "l.jsonl"), "--workspace", str(tmp_path),
               cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "out.txt").read_text() == "x"


def test_bad_specs_file_exits_2_naming_the_field(tmp_path: Path) -> None:
    specs = write_specs(tmp_path, [], extra="max_turns = 'ten'\n")
    done = run("run", str(specs), "--agent", "helper", "x", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr == (
        f"subagent: {specs}: agent 'helper' field 'max_turns': "
        "must be an integer, not a string ('ten')\n"
    )


def test_unknown_agent_exits_2(tmp_path: Path) -> None:
    specs = write_specs(tmp_path, [{"content": "x"}])
    done = run("run", str(specs), "--agent", "nobody", "x",
               "--ledger", str(tmp_path / "l.jsonl"), cwd=tmp_path)
    assert done.returncode == 2
    assert "unknown agent 'nobody'; registered agents: helper" in done.stderr


def test_failed_task_exits_1(tmp_path: Path) -> None:
    specs = write_specs(tmp_path, [])  # the replay runs out at once: a model error
    done = run("run", str(specs), "--agent", "helper", "x",
               "--ledger", str(tmp_path / "l.jsonl"), cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert "the task did not finish: " in done.stdout
