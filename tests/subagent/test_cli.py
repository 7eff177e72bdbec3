"""The ``subagent`` command, run as a subprocess."""

from __future__ import annotations

import json
import os
import re
import select
import stat
import subprocess
import sys
from pathlib import Path

import pytest

import ledger


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "subagent", *args],
        cwd=cwd, capture_output=True, text=True, timeout=120, check=False,
    )


@pytest.mark.slow
def test_demo_exits_0_with_the_tree_and_a_verified_ledger(tmp_path: Path) -> None:
    path = tmp_path / "demo.jsonl"
    done = run("demo", "--ledger", str(path), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    # three subagents in parallel: all three start before the first one ends
    lines = out.splitlines()
    first_end = min(i for i, line in enumerate(lines) if "done after" in line)
    started = {line.split(":")[0].split("/")[-2] for line in lines[:first_end]
               if line.endswith(": started")}
    # (the fact checker may start before the first end too: its parent lends it a slot)
    assert started >= {"coordinator", "researcher", "reader", "reviewer"}
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


@pytest.mark.slow
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


def run_specs_file(tmp_path: Path, model: str, *args: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "specs.toml").write_text(f"[agents.a]\nmodel = {json.dumps(model)}\n")
    return subprocess.run(
        [sys.executable, "-m", "subagent", "run", "specs.toml", "--agent", "a", "x", *args],
        cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False,
    )


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("/dev/zero", "it is a character device, not a regular file"),
        ("fifo", "it is a FIFO, not a regular file"),
        ("huge.json", "it is larger than the limit of 16777216 bytes"),
        ("sub", "it is a directory, not a regular file"),
    ],
)
@pytest.mark.slow
def test_a_scripted_path_that_is_no_small_regular_file_exits_2(
    tmp_path: Path, name: str, reason: str
) -> None:
    # Before: /dev/zero read until memory ran out, and a FIFO hung the command.
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "sub").mkdir()
    with open(tmp_path / "huge.json", "wb") as f:
        f.truncate(16 * 1024 * 1024 + 1)
    done = run_specs_file(tmp_path, "scripted:" + name)
    assert done.returncode == 2
    assert done.stderr == (
        f"subagent: specs.toml: agent 'a' field 'model': Cannot read replay file "
        f"{name!r}: {reason}\n"
    )


def test_a_deeply_nested_specs_file_exits_2_without_a_traceback(tmp_path: Path) -> None:
    (tmp_path / "specs.toml").write_text("a = " + "[" * 50_000)
    done = run("run", "specs.toml", "--agent", "a", "x", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr == "subagent: specs.toml: invalid TOML: values are nested too deeply\n"


HOSTILE = (
    "\x1b]52;c;ZXZpbA==\x07 clear\x1b[2J title\x1b]0;pwned\x07 [red]markup[/red] "
    "\u202egnp.exe back\x08\x08 over\rwrite\nsecond line\ttab"
)


def test_model_text_reaches_the_terminal_neutralised(tmp_path: Path) -> None:
    specs = write_specs(tmp_path, [
        {"tool_calls": [{"id": "c1", "name": "read\x1b]0;t\x07file", "arguments": {}}]},
        {"tool_calls": [{"id": "c2", "name": "read_file",
                         "arguments": {"path": "nope\x1b[2J\u202e.txt"}}]},
        {"content": HOSTILE},
    ])
    done = run("run", str(specs), "--agent", "helper", "x", "--ledger",
               str(tmp_path / "l.jsonl"), "--workspace", str(tmp_path), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    for raw in ("\x1b", "\x07", "\x08", "\r", "\u202e"):
        assert raw not in out
    assert "helper/0001: calls read\\x1b]0;t\\x07file {}" in out
    assert "helper/0001: read\\x1b]0;t\\x07file failed: unknown tool" in out
    assert 'helper/0001: calls read_file {"path": "nope\\u001b[2J\\u202e.txt"}' in out
    assert (
        "output:\n\\x1b]52;c;ZXZpbA==\\x07 clear\\x1b[2J title\\x1b]0;pwned\\x07 "
        "[red]markup[/red] \\u202egnp.exe back\\x08\\x08 over\\rwrite\nsecond line\ttab\n"
    ) in out


def test_approve_applies_each_answer_to_the_call_shown(tmp_path: Path) -> None:
    # Two background children ask at once; the questions come one at a time, and
    # each answer is chosen from the question shown: "y" for a.txt, "n" for b.txt.
    def replies(name: str, data: list[dict[str, object]]) -> None:
        (tmp_path / name).write_text(json.dumps(data))

    replies("boss.json", [
        {"tool_calls": [
            {"id": "d1", "name": "subagent",
             "arguments": {"agent": "wa", "task": "write a", "wait": False}},
            {"id": "d2", "name": "subagent",
             "arguments": {"agent": "wb", "task": "write b", "wait": False}},
        ]},
        {"tool_calls": [{"id": "w1", "name": "subagent_results", "arguments": {"all": True}}]},
        {"content": "both asked"},
    ])
    for agent in ("a", "b"):
        # Raw newlines and CR in the arguments' JSON, a bidi override in a value.
        arguments = f'{{"path":\n\r"{agent}.txt", "content": "\u202eline1\\nline2"}}'
        replies(f"w{agent}.json", [
            {"tool_calls": [{"id": "c1", "name": "write_file", "arguments": arguments}]},
            {"content": f"{agent} done"},
        ])
    (tmp_path / "specs.toml").write_text(
        '[agents.boss]\nmodel = "scripted:boss.json"\ntools = ["subagent", "subagent_results"]\n'
        '[agents.wa]\nmodel = "scripted:wa.json"\ntools = ["write_file"]\n'
        '[agents.wb]\nmodel = "scripted:wb.json"\ntools = ["write_file"]\n'
    )
    output = b""
    questions: list[str] = []
    with subprocess.Popen(
        [sys.executable, "-m", "subagent", "run", "specs.toml", "--agent", "boss", "go",
         "--approve", "--ledger", "l.jsonl", "--workspace", "."],
        cwd=tmp_path, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    ) as proc:
        assert proc.stdin is not None and proc.stderr is not None
        try:
            while chunk := _read_some(proc, timeout=60):
                output += chunk
                while output.count(b"? [y/N] ") > len(questions):
                    line = output.rsplit(b"\n", 1)[-1].decode()
                    assert line.count("? [y/N] ") == 1  # one question at a time, on one line
                    questions.append(line)
                    answer = "n" if "b.txt" in line else "y"
                    proc.stdin.write(answer.encode() + b"\n")
                    proc.stdin.flush()
            assert proc.wait(timeout=60) == 0, proc.stderr.read()
        finally:
            if proc.poll() is None:
                proc.kill()
    writes = sorted(q for q in questions if "write_file" in q)
    assert writes == [
        'allow boss/0001/wa/0002 to call write_file {"path":\\n\\r"a.txt", '
        '"content": "\\u202eline1\\nline2"}? [y/N] ',
        'allow boss/0001/wb/0003 to call write_file {"path":\\n\\r"b.txt", '
        '"content": "\\u202eline1\\nline2"}? [y/N] ',
    ]
    assert len(questions) == 5  # two delegations, one wait, two writes
    assert (tmp_path / "a.txt").read_text() == "\u202eline1\nline2"
    assert not (tmp_path / "b.txt").exists()
    text = output.decode()
    assert "wb/0003: denied write_file: the approver refused tool 'write_file'" in text


def _read_some(proc: subprocess.Popen[bytes], timeout: float) -> bytes:
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    assert ready, "the command printed nothing for a minute"
    return os.read(proc.stdout.fileno(), 65536)


@pytest.mark.slow
def test_the_state_directory_is_private(tmp_path: Path) -> None:
    specs = write_specs(tmp_path, [{"content": "hi"}])
    state = tmp_path / "state"
    env = {**os.environ, "XDG_STATE_HOME": str(state)}
    done = subprocess.run(
        [sys.executable, "-m", "subagent", "run", str(specs), "--agent", "helper", "x"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False, env=env,
    )
    assert done.returncode == 0, done.stderr
    assert stat.S_IMODE((state / "subagent").stat().st_mode) == 0o700
    assert stat.S_IMODE(state.stat().st_mode) == 0o700  # created by us, so private too
    # One made world-readable by an older version is narrowed.
    os.chmod(state / "subagent", 0o755)
    done = subprocess.run(
        [sys.executable, "-m", "subagent", "run", str(specs), "--agent", "helper", "x"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False, env=env,
    )
    assert stat.S_IMODE((state / "subagent").stat().st_mode) == 0o700


def test_a_ledger_that_cannot_be_created_exits_2(tmp_path: Path) -> None:
    specs = write_specs(tmp_path, [{"content": "hi"}])
    (tmp_path / "file").write_text("")
    done = run("run", str(specs), "--agent", "helper", "x", "--ledger", "file/l.jsonl",
               cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr == "subagent: cannot create the ledger 'file/l.jsonl': File exists\n"


def test_the_live_tree_on_a_terminal_shows_model_text_neutralised(tmp_path: Path) -> None:
    # On a (pseudo-)terminal the command draws the live tree with rich: rich's own
    # colour and cursor sequences are expected; the model's must not get through.
    specs = write_specs(tmp_path, [{"content": "[blue]tree[/blue]\x1b]0;pwned\x07 " + HOSTILE}])
    controller, terminal = os.openpty()
    with subprocess.Popen(
        [sys.executable, "-m", "subagent", "run", str(specs), "--agent", "helper", "x",
         "--ledger", "l.jsonl", "--workspace", "."],
        cwd=tmp_path, stdin=subprocess.DEVNULL, stdout=terminal, stderr=subprocess.PIPE,
    ) as proc:
        os.close(terminal)
        shown = b""
        try:
            while True:
                ready, _, _ = select.select([controller], [], [], 60)
                assert ready, "the command printed nothing for a minute"
                try:
                    chunk = os.read(controller, 65536)
                except OSError:  # EIO: the command ended and closed the terminal
                    break
                if not chunk:
                    break
                shown += chunk
            assert proc.wait(timeout=60) == 0
        finally:
            os.close(controller)
            if proc.poll() is None:
                proc.kill()
    text = shown.decode()
    assert "subagents" in text and "\x1b[" in text  # rich drew the live tree
    for raw in ("\x1b]", "\x1b[2J", "\x07", "\x08", "\u202e"):
        assert raw not in text
    tree = text.split("output:")[0]
    assert "[blue]tree[/blue]\\x1b]0;pwned\\x07" in tree  # shown, not applied


# -- cost and budgets (issue 22 item 5) -----------------------------------------------


@pytest.mark.slow
def test_demo_shows_the_cost_of_the_tree_and_the_budget_left(tmp_path: Path) -> None:
    done = run("demo", "--ledger", str(tmp_path / "demo.jsonl"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert ("prices: the demo's own table ($1 per million input tokens, $4 per million "
            "output), no real model's\nbudget: 20000 tokens and $0.02 for the whole tree\n") in out
    # each run's line: its tokens and cost at the demo's prices (10 input per output token)
    assert re.search(r"\n      fact_checker/000[2-5]  done  turn 1  220 tok  \$0\.000280  ", out)
    found = re.search(r"usage of the whole tree: (\d+) input \+ (\d+) output tokens over 5 runs; "
                      r"cost \$(\d\.\d{6})\nbudget left: (\d+) of 20000 tokens, "
                      r"\$(\d\.\d{6}) of \$0\.02\n", out)
    assert found, out
    inputs, outputs, cost, tokens_left, cost_left = found.groups()
    expected = (int(inputs) * 1.0 + int(outputs) * 4.0) / 1_000_000
    assert cost == f"{expected:.6f}"
    assert int(tokens_left) == 20000 - int(inputs) - int(outputs)
    assert cost_left == f"{0.02 - expected:.6f}"


def test_a_spent_pool_budget_stops_the_run_and_is_shown(tmp_path: Path) -> None:
    reply: dict[str, object] = {
        "tool_calls": [{"id": "c1", "name": "read_file", "arguments": {"path": "notes.txt"}}],
        "usage": {"input_tokens": 7, "output_tokens": 3},
    }
    specs = write_specs(tmp_path, [reply, reply, {"content": "never"}],
                        "\n[pool.budget]\ntokens = 15\n")
    done = run("run", str(specs), "--agent", "helper", "read", "--plain",
               "--ledger", str(tmp_path / "l.jsonl"), "--workspace", str(tmp_path),
               cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    spent = "tokens 20 of 15, reached by a model call of helper/0001"
    lines = done.stdout.splitlines()
    assert f"budget: the pool used 80% of its budget: {spent}" in lines
    assert f"budget: the pool spent its budget: {spent}" in lines
    assert (f"the task did not finish: task helper/0001 stopped: the pool spent its budget: "
            f"{spent}") in lines
    assert ("usage of the whole tree: 14 input + 6 output tokens over 1 runs; "
            "cost unknown (no price for some of its models)") in lines
    assert "budget left: 0 of 15 tokens" in lines
    assert "ledger verified: " in done.stdout


def test_an_agents_budget_is_shown_on_its_line(tmp_path: Path) -> None:
    specs = write_specs(tmp_path, [
        {"tool_calls": [{"id": "c1", "name": "read_file", "arguments": {"path": "notes.txt"}}],
         "usage": {"input_tokens": 7, "output_tokens": 3}},
        {"content": "read it", "usage": {"input_tokens": 7, "output_tokens": 3}},
    ], "budget = { tokens = 100, model_calls = 5 }\n")
    done = run("run", str(specs), "--agent", "helper", "read", "--plain",
               "--ledger", str(tmp_path / "l.jsonl"), "--workspace", str(tmp_path),
               cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert ("  helper/0001  done  turn 2  20 tok  budget left 80 of 100 tokens, 3 of 5 model "
            "calls  answered: read it") in done.stdout.splitlines()
