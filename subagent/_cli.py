"""The ``subagent`` command: run an agent from a specs file, or the offline demo.

Exit codes:
  0  the task produced an answer and the ledger verified
  1  the task failed, timed out or was cancelled
  2  bad usage or an invalid specs file (the message names the file, agent and field)
  3  the ledger did not verify
  130  interrupted (Ctrl-C)
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

import attrs
import trio

from agentcore import (
    ApprovalGate,
    GateDecision,
    GateRequest,
    Tool,
    ToolGate,
    Usage,
    allow_all,
    read_only,
)

from ._declarative import SpecFile, load_specs
from ._errors import SubagentError, TaskError, UnknownAgentError, format_path
from ._events import Event
from ._pool import open_pool
from ._results import SubagentResultsTool
from ._stream import Stream
from ._tool import SubagentTool
from ._view import TreeView, render_lines, render_rich

EXIT_OK, EXIT_TASK_FAILED, EXIT_USAGE, EXIT_LEDGER, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


def default_ledger_path() -> Path:
    """A fresh ledger file in the user's state directory."""
    state = Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state")
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return state / "subagent" / f"ledger-{stamp}-{os.getpid()}.jsonl"


def open_sink(path: Path) -> Any:
    """The ledger sink for ``path``: SQLite for ``.sqlite``/``.db``, JSON Lines otherwise."""
    import ledger

    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix in (".sqlite", ".sqlite3", ".db"):
        return ledger.SqliteSink(path)
    return ledger.JsonlSink(path)


@attrs.define
class Display:
    """Shows the tree live: rich when available on a terminal, else plain lines."""

    out: TextIO
    rich: bool
    view: TreeView = attrs.Factory(TreeView)
    _live: Any = None

    def __enter__(self) -> Display:
        if self.rich:
            from rich.console import Console
            from rich.live import Live

            self._live = Live(render_rich(self.view), console=Console(file=self.out),
                              refresh_per_second=8, transient=False)
            self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.update(render_rich(self.view))
            self._live.__exit__(None, None, None)

    def show(self, ev: Event) -> None:
        line = self.view.update(ev)
        if self._live is not None:
            self._live.update(render_rich(self.view))
        elif line is not None:
            print(f"{format_path(ev.path)}: {line}", file=self.out, flush=True)

    def final(self) -> None:
        if self._live is None:
            print("final tree:", file=self.out)
            for line in render_lines(self.view):
                print("  " + line, file=self.out)


async def terminal_approver(request: GateRequest) -> bool:
    """Asks on the terminal whether to allow one tool call. A checkpoint."""
    question = (
        f"allow {request.tool.name} {request.call.arguments} for "
        f"{format_path(request.path)}? [y/N] "
    )
    answer = await trio.to_thread.run_sync(input, question, abandon_on_cancel=True)
    return answer.strip().lower() in ("y", "yes")


async def read_only_or_delegation(request: GateRequest) -> GateDecision:
    """The command's default gate: read-only tools and delegation are allowed.

    Delegating changes nothing by itself, and each subagent's own tool calls pass
    this same gate. A checkpoint.
    """
    if request.tool.name == "subagent":
        await trio.lowlevel.checkpoint()
        return GateDecision(True, "delegation")
    return await read_only(request)


def choose_gate(args: argparse.Namespace) -> ToolGate:
    if args.yes:
        return allow_all
    if args.approve:
        return ApprovalGate(terminal_approver)
    return read_only_or_delegation


async def run_specs(
    specs: SpecFile,
    agent: str,
    task_text: str,
    *,
    gate: ToolGate,
    ledger_path: Path,
    out: TextIO,
    rich: bool,
) -> int:
    """Run ``agent`` on ``task_text`` with a live tree, then print the output, the usage
    of the whole tree and the ledger's verification. A checkpoint."""
    import ledger

    names = tuple(sorted(spec.name for spec in specs.specs))
    if agent not in names:
        raise UnknownAgentError(agent, names)
    sink = open_sink(ledger_path)
    stream = Stream(256)
    defaults = attrs.evolve(specs.defaults, gate=gate, audit=sink)
    code = EXIT_OK
    output = ""
    usage: Usage | None = None
    with Display(out, rich) as display:
        async with trio.open_nursery() as nursery:

            async def show() -> None:
                async for ev in stream:
                    display.show(ev)

            nursery.start_soon(show)
            try:
                async with open_pool(**specs.pool, defaults=defaults, events=stream) as pool:  # type: ignore[arg-type]
                    pool_tools: dict[str, Tool] = {
                        "subagent": SubagentTool(pool),
                        "subagent_results": SubagentResultsTool(pool),
                    }
                    for spec in specs.specs_for(pool_tools):
                        pool.register(spec)
                    task = await pool.submit(agent, task_text)
                    try:
                        result = await task.wait()
                        output = result.output
                        usage = result.tree_usage
                    except TaskError as exc:
                        code = EXIT_TASK_FAILED
                        output = f"the task did not finish: {exc}"
            finally:
                stream.close()
                await sink.aclose()
        display.final()
    print("\noutput:\n" + output, file=out)
    if usage is None:  # the task failed: add up what the events showed
        usage = Usage(*display.view.total_tokens())
    print(f"\nusage of the whole tree: {usage.input_tokens} input + {usage.output_tokens} "
          f"output tokens over {len(display.view.nodes)} runs", file=out)
    report = ledger.verify(ledger_path)
    print(f"ledger: {ledger_path}", file=out)
    if report.ok:
        print(f"ledger verified: {report.entries} entries, chain intact", file=out)
    else:
        print(f"ledger did NOT verify: {report.message}", file=out)
        code = code or EXIT_LEDGER
    return code


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="subagent", description="Run LLM subagents on trio.",
        epilog="exit codes: 0 answered, 1 task failed, 2 bad usage or specs, "
               "3 ledger did not verify, 130 interrupted",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="run an agent from a specs file on a task")
    run.add_argument("specs", type=Path, help="the TOML specs file")
    run.add_argument("--agent", required=True, help="the agent to run")
    run.add_argument("task", help="the task text")
    run.add_argument("--workspace", type=Path, default=None,
                     help="root of the workspace tools (default: the current directory)")
    demo = commands.add_parser("demo", help="the offline demo on the scripted model")
    for sub in (run, demo):
        sub.add_argument("--ledger", type=Path, default=None,
                         help="ledger file (.jsonl, or .sqlite for SQLite); "
                              "default: a new file in the state directory")
        sub.add_argument("--plain", action="store_true", help="plain lines, no live tree")
    gates = run.add_mutually_exclusive_group()
    gates.add_argument("--approve", action="store_true", help="ask on the terminal per tool call")
    gates.add_argument("--yes", action="store_true", help="allow every tool call")
    return parser


def _use_rich(args: argparse.Namespace, out: TextIO) -> bool:
    if args.plain or getattr(args, "approve", False) or not out.isatty():
        return False
    try:
        import rich  # noqa: F401
    except ImportError:
        return False
    return True


def main(argv: Sequence[str] | None = None, *, out: TextIO | None = None) -> int:
    """The command line; returns the exit code."""
    out = out or sys.stdout
    args = build_parser().parse_args(argv)
    ledger_path = args.ledger or default_ledger_path()
    rich = _use_rich(args, out)
    try:
        if args.command == "demo":
            from ._demo import run_demo

            return trio.run(run_demo, ledger_path, out, rich)
        workspace = args.workspace or Path.cwd()
        specs = load_specs(args.specs, workspace=workspace)
        return trio.run(
            lambda: run_specs(specs, args.agent, args.task, gate=choose_gate(args),
                              ledger_path=ledger_path, out=out, rich=rich)
        )
    except SubagentError as exc:
        print(f"subagent: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("subagent: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
