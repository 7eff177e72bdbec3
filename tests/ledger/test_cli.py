from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ledger import Chain, Entry, Record, query, tail
from ledger.__main__ import main
from ledger.encoding import encode_entry

from ._helpers import Ticking


def build(records: list[Record]) -> list[Entry]:
    clock = Ticking()
    chain = Chain()
    return [chain.link(record, clock())[0] for record in records]


ENTRIES = build(
    [
        Record("prompt", "r1", ("root/0001",), "jess", arguments="list files"),
        Record(
            "tool_request",
            "r1",
            ("root/0001",),
            "jess",
            tool="ls",
            call_id="c1",
            arguments='{"dir": "."}',
        ),
        Record(
            "gate_decision", "r1", ("root/0001",), "jess", tool="ls", call_id="c1", verdict="allow"
        ),
        Record(
            "tool_result",
            "r2",
            ("root/0001", "web/0002"),
            "web",
            tool="ls",
            call_id="c1",
            result="a\nb",
            duration=0.25,
        ),
        Record("run_end", "r1", ("root/0001",), "jess", data={"end_reason": "stop", "turns": 2}),
    ]
)


@pytest.fixture
def ledger_file(tmp_path: Path) -> Path:
    path = tmp_path / "audit.jsonl"
    path.write_text("".join(f"{encode_entry(e)}\n" for e in ENTRIES))
    return path


HEAD = ENTRIES[-1].hash


def test_verify_sound(ledger_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["verify", str(ledger_file)]) == 0
    assert capsys.readouterr().out == f"{ledger_file}: 5 entries, chain sound, head {HEAD}\n"


def test_verify_tampered(ledger_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ledger_file.write_text(ledger_file.read_text().replace('"verdict":"allow"', '"verdict":"deny"'))
    assert main(["verify", str(ledger_file)]) == 1
    assert capsys.readouterr().err == (
        f"{ledger_file}: entry 3 was edited: its hash does not match its content\n"
    )


def test_verify_torn_then_repair(ledger_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with ledger_file.open("a") as file:
        file.write('{"seq":6')
    assert main(["verify", str(ledger_file)]) == 1
    assert capsys.readouterr().err == (
        f"{ledger_file}: entry 6 is a torn last line (8 bytes, no newline)\n"
    )
    assert main(["repair", str(ledger_file)]) == 0
    assert capsys.readouterr().out == (
        f"removed a torn last line of 8 bytes; {ledger_file}: 5 entries, chain sound, head {HEAD}\n"
    )
    assert main(["repair", str(ledger_file)]) == 0
    assert capsys.readouterr().out == (
        f"{ledger_file}: 5 entries, chain sound, head {HEAD}; nothing to repair\n"
    )


def test_repair_refuses_tampering(ledger_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lines = ledger_file.read_text().splitlines(keepends=True)
    ledger_file.write_text("".join(lines[:1] + lines[2:]))
    assert main(["repair", str(ledger_file)]) == 1
    assert capsys.readouterr().err == f"cannot repair: {ledger_file}: entry 2 was deleted\n"


def test_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "none.jsonl"
    assert main(["verify", str(path)]) == 2
    assert capsys.readouterr().err == (
        f"error: cannot read ledger {path}: No such file or directory\n"
    )


def test_tail_is_readable(ledger_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tail", str(ledger_file), "-n", "3"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "     3  2025-01-02T00:00:03.000000Z  gate_decision    root/0001"
        "  run=r1 agent=jess tool=ls call_id=c1 verdict=allow",
        "     4  2025-01-02T00:00:04.000000Z  tool_result      root/0001 > web/0002"
        '  run=r2 agent=web tool=ls call_id=c1 result="a\\nb" duration=0.250s',
        "     5  2025-01-02T00:00:05.000000Z  run_end          root/0001"
        "  run=r1 agent=jess end_reason=stop turns=2",
    ]


def test_tail_json(ledger_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tail", str(ledger_file), "-n", "1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == json.loads(encode_entry(ENTRIES[-1]))


def test_query_filters(ledger_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["query", str(ledger_file), "--kind", "tool_request"]) == 0
    assert capsys.readouterr().out == (
        "     2  2025-01-02T00:00:02.000000Z  tool_request     root/0001"
        '  run=r1 agent=jess tool=ls call_id=c1 arguments={"dir": "."}\n'
    )
    assert main(["query", str(ledger_file), "--path", "root/0001", "--path", "web/0002"]) == 0
    assert capsys.readouterr().out.split()[0] == "4"


def test_jsonl_queries_match_sqlite_semantics(ledger_file: Path) -> None:
    assert [e.seq for e in query(ledger_file, path_prefix=["root/0001"])] == [1, 2, 3, 4, 5]
    assert [e.seq for e in query(ledger_file, path_prefix=["root/0001", "web/0002"])] == [4]
    assert [e.seq for e in query(ledger_file, run_id="r1", limit=2)] == [1, 2]
    assert [
        e.seq for e in query(ledger_file, since="2025-01-02T00:00:02", until="2025-01-02T00:00:04")
    ] == [2, 3]
    assert query(ledger_file, limit=0) == []
    assert tail(ledger_file, 2) == ENTRIES[-2:]
    assert tail(ledger_file, 0) == []


def test_module_entry_point(ledger_file: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ledger", "verify", str(ledger_file)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert (done.returncode, done.stdout) == (
        0,
        f"{ledger_file}: 5 entries, chain sound, head {HEAD}\n",
    )


@pytest.mark.slow
def test_ctrl_c_is_one_line_and_130(ledger_file: Path) -> None:
    # A real SIGINT, raised when verify opens the ledger (an audit hook): the default
    # handler's KeyboardInterrupt used to end the command with a traceback.
    script = (
        "import signal, sys\n"
        "from ledger.__main__ import main\n"
        "sys.addaudithook(lambda event, args: event == 'open' and str(args[0])"
        ".endswith('audit.jsonl') and signal.raise_signal(signal.SIGINT))\n"
        f"sys.exit(main(['verify', {str(ledger_file)!r}]))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          check=False)
    assert (done.returncode, done.stdout, done.stderr) == (130, "", "interrupted\n")


def seqs(out: str) -> list[int]:
    return [int(line.split()[0]) for line in out.splitlines()]


def test_query_times_are_read_as_times(
    ledger_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Compared as text, "...00:00:02Z" sorted after the entry at 00:00:02.000000Z
    # (and an offset or a word compared as letters): entries silently left out.
    assert main(["query", str(ledger_file), "--since", "2025-01-02T00:00:02Z",
                 "--until", "2025-01-02T00:00:04Z"]) == 0
    assert seqs(capsys.readouterr().out) == [2, 3]
    assert main(["query", str(ledger_file), "--since", "2025-01-02T01:00:03+01:00"]) == 0
    assert seqs(capsys.readouterr().out) == [3, 4, 5]
    assert main(["query", str(ledger_file), "--until", "2025-01-02"]) == 0
    assert seqs(capsys.readouterr().out) == []
    for wrong in ("yesterday", "9999-12-31T23:59:59-14:00"):
        with pytest.raises(SystemExit) as info:
            main(["query", str(ledger_file), "--since", wrong])
        assert info.value.code == 2
        assert capsys.readouterr().err.splitlines()[-1] == (
            f"python -m ledger query: error: argument --since: not an ISO-8601 time: "
            f"{wrong!r}")


@pytest.mark.slow
def test_sigterm_is_one_line_and_143(ledger_file: Path) -> None:
    # A real SIGTERM (how systemd and docker stop a process), raised when verify opens
    # the ledger: the default action used to kill the command with no line at all.
    script = (
        "import signal, sys\n"
        "from ledger.__main__ import main\n"
        "sys.addaudithook(lambda event, args: event == 'open' and str(args[0])"
        ".endswith('audit.jsonl') and signal.raise_signal(signal.SIGTERM))\n"
        f"code = main(['verify', {str(ledger_file)!r}])\n"
        "assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL\n"
        "sys.exit(code)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          check=False)
    assert (done.returncode, done.stdout, done.stderr) == (143, "", "terminated\n")
