"""The ``subagent`` command: run an agent from a specs file, or the offline demo.

Exit codes:
  0  the task produced an answer and the ledger verified
  1  the task failed, timed out or was cancelled
  2  bad usage or an invalid specs file (the message names the file, agent and field)
  3  the ledger did not verify
  4  the run paused: calls wait for approval (``--approve-later``; see ``pending``)
  130  interrupted (Ctrl-C)
  143  terminated (SIGTERM: stopped as on Ctrl-C, child processes included)

Any other exception is one line (``subagent: unexpected error: ...``) and exit 1.

Everything printed that a model or a tool wrote goes through
:mod:`subagent._safe_text` first: no terminal escape or control character reaches
the terminal from them.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TextIO

import attrs
import trio

import ledger
from agentcore import (
    ResumeError,
    RunState,
    Tool,
    ToolGate,
    Usage,
    allow_all,
)

from .._delegation._results import SubagentResultsTool
from .._delegation._tool import SubagentTool
from .._durable._store import SqliteCheckpoints
from .._errors import SubagentError, TaskError, TaskPaused, UnknownAgentError, format_path
from .._events import Event
from .._ledgerfile import default_ledger_path, open_sink
from .._pool._open import open_pool
from .._safe_text import one_line, safe_text
from .._specs._file import SpecFile, load_specs
from .._stream import Stream
from ._base import (
    EXIT_LEDGER,
    EXIT_OK,
    EXIT_PAUSED,
    EXIT_TASK_FAILED,
    EXIT_USAGE,
    read_only_or_delegation,
)
from ._demo import PRICING as DEMO_PRICING
from ._demo import TASK as DEMO_TASK
from ._demo import demo_specs
from ._exit import EXIT_TERMINATED, ending, say, sigterm_as_interrupt
from ._ledgerclaim import take_once
from ._recover import add_recover, left_failed, left_paused, paused_files
from ._statefile import (
    answer,
    check_free,
    defer_changes,
    print_pending,
    read_state,
    store_paused,
)
from ._temporal import add_temporal, run_temporal
from ._terminal import Screen, TerminalAnswers, TerminalApproval
from ._view import TreeView, dollars, left, render_lines, render_rich

if TYPE_CHECKING:
    from .._pool._pool import Pool
    from ..otel._environment import EnvironmentTracing



@attrs.define
class Display:
    """Shows the tree live: rich when available on a terminal, else plain lines."""

    screen: Screen
    rich: bool
    view: TreeView = attrs.Factory(TreeView)
    _live: Any = None

    def __enter__(self) -> Display:
        if self.rich:
            from rich.console import Console
            from rich.live import Live

            self._live = Live(render_rich(self.view), console=Console(file=self.screen.out),
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
        elif line is not None and ev.budget is not None:
            self.screen.line(f"budget: {line}")
        elif line is not None:
            self.screen.line(f"{one_line(format_path(ev.path))}: {one_line(line)}")

    def final(self) -> None:
        if self._live is None:
            self.screen.line("final tree:")
            for line in render_lines(self.view):
                self.screen.line("  " + one_line(line))


def choose_gate(args: argparse.Namespace, screen: Screen) -> ToolGate:
    """The gate the options ask for: ``--yes`` allows all, ``--approve`` asks on the
    terminal (answers from standard input), else :func:`read_only_or_delegation`."""
    if getattr(args, "yes", False):
        return allow_all
    if args.command == "resume" or getattr(args, "approve_later", None) is not None:
        return defer_changes
    if args.approve:
        # No standard input (started with it closed): every question is denied.
        fd = sys.stdin.fileno() if sys.stdin is not None else -1
        return TerminalApproval(screen, TerminalAnswers(fd))
    return read_only_or_delegation


async def run_specs(
    specs: SpecFile,
    agent: str,
    task_text: str,
    *,
    gate: ToolGate,
    ledger_path: Path,
    screen: Screen,
    rich: bool,
    state_file: Path | None = None,
    resume: Path | None = None,
    on_pool: Callable[[Pool], object] | None = None,
    checkpoints: Path | None = None,
    recover: bool = False,
) -> int:
    """Run ``agent`` on ``task_text`` (or continue the paused run in the file ``resume``,
    taken only once the pool's specs can resume it; or with
    ``recover`` the tasks a crash left unfinished in ``checkpoints``) with a live
    tree, then print the output, the usage of the whole tree and the ledger's
    verification. A run that pauses is stored in ``state_file`` (with ``recover``,
    the trees found waiting for a human and those that pause go to it, then to
    ``state_file.2``, ...); with ``checkpoints`` every task's state is committed
    there. A checkpoint.

    ``on_pool`` is called with the pool once it is open (``--otel`` instruments it)."""
    names = tuple(sorted(spec.name for spec in specs.specs))
    if agent not in names and not recover:
        raise UnknownAgentError(agent, names)
    store = SqliteCheckpoints(checkpoints) if checkpoints is not None else None
    if store is not None and not recover:
        # A file that is not a checkpoint database is refused before anything runs
        # (exit 2, as recover refuses it), not by the task's first checkpoint (exit 1).
        await store.run_ids()
    sink = open_sink(ledger_path)
    stream = Stream(256)
    defaults = attrs.evolve(specs.defaults, gate=gate, audit=sink)
    code = EXIT_OK
    output = ""
    usage: Usage | None = None
    refused: Exception | None = None
    out = screen.out
    with Display(screen, rich) as display:
        async with trio.open_nursery() as nursery:

            async def show() -> None:
                async for ev in stream:
                    display.show(ev)

            nursery.start_soon(show)
            try:
                display.view.pool_budget = specs.budget
                async with open_pool(
                    **specs.pool, defaults=defaults, events=stream, mcp=specs.mcp,  # type: ignore[arg-type]
                    budget=specs.budget, checkpoints=store,
                ) as pool:
                    if on_pool is not None:
                        on_pool(pool)
                    pool_tools: dict[str, Tool] = {
                        "subagent": SubagentTool(pool),
                        "subagent_results": SubagentResultsTool(pool),
                    }
                    for spec in specs.specs_for(pool_tools, pool.mcp_tools):
                        pool.register(spec)
                    display.view.budgets = {
                        name: spec.budget for name, spec in pool.specs.items() if spec.budget
                    }
                    files = paused_files(state_file)
                    said: list[str] = []
                    if recover:
                        recovered = await pool.recover()
                        tasks = list(recovered)
                        for tree in recovered.paused:
                            code = EXIT_PAUSED
                            said.append(left_paused(tree.state, tree.checkpoint,
                                                    _paused(tree.state, next(files))))
                        for run_id, error in recovered.failed:
                            code = EXIT_TASK_FAILED
                            said.append(left_failed(run_id, error))
                        if not tasks and not said:
                            said.append("nothing to recover: no task was left unfinished")
                    elif resume is not None:
                        try:
                            state = await take_once(pool, resume, sink, ledger_path)
                            tasks = [await pool.resume(state)]
                        except (SubagentError, ResumeError) as exc:
                            refused = exc  # raised below, out of the nurseries
                            tasks = []
                    else:
                        tasks = [await pool.submit(agent, task_text)]
                    for task in tasks:
                        try:
                            result = await task.wait()
                            output = result.output
                            usage = result.tree_usage
                        except TaskPaused as paused:
                            code = EXIT_PAUSED
                            output = _paused(paused.state, next(files))
                        except TaskError as exc:
                            code = code or EXIT_TASK_FAILED
                            output = f"the task did not finish: {one_line(str(exc))}"
                        said.append(output)
                    output = "\n\n".join(said)
            finally:
                stream.close()
                await sink.aclose()
                if store is not None:
                    await store.aclose()
        if refused is not None:
            raise SubagentError(str(refused))
        display.final()
    print("\noutput:\n" + safe_text(output, keep_newlines=True), file=out)
    spend = display.view.spend()
    if usage is None:  # the task failed: add up what the events showed
        usage = Usage(spend.input_tokens, spend.output_tokens, cost=spend.cost)
    cost = "cost unknown (no price for some of its models)" if usage.cost is None else (
        f"cost {dollars(usage.cost)}")
    print(f"\nusage of the whole tree: {usage.input_tokens} input + {usage.output_tokens} "
          f"output tokens over {len(display.view.nodes)} runs; {cost}", file=out)
    if specs.budget is not None:
        print(f"budget left: {left(specs.budget, spend)}", file=out)
    print(f"ledger: {one_line(str(ledger_path))}", file=out)
    if sink.statistics().recorded == 0 and not await trio.Path(ledger_path).exists():
        # Nothing happened to audit (a recovery with nothing left): no file, no chain.
        print("ledger: nothing was recorded", file=out)
        return code
    try:
        report = ledger.verify(ledger_path)
    except ledger.LedgerError as exc:  # nothing readable was written
        print(f"ledger did NOT verify: {one_line(str(exc))}", file=out)
        return code or EXIT_LEDGER
    if report.ok:
        print(f"ledger verified: {report.entries} entries, chain intact", file=out)
    else:
        print(f"ledger did NOT verify: {one_line(report.message)}", file=out)
        code = code or EXIT_LEDGER
    return code


class _Parser(argparse.ArgumentParser):
    """argparse's parser (and its subcommands' parsers), whose error is one line."""

    def error(self, message: str) -> NoReturn:
        # argparse prints its usage first: several lines, where every exit is one.
        say(f"{one_line(message, 500)} (see {self.prog} --help)")
        self.exit(EXIT_USAGE)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="subagent", description="Run LLM subagents on trio.",
        epilog="exit codes: 0 answered, 1 task failed, 2 bad usage or specs, "
               "3 ledger did not verify, 4 paused (calls wait for approval), "
               "130 interrupted",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="run an agent from a specs file on a task")
    run.add_argument("specs", type=Path, help="the TOML specs file")
    run.add_argument("--agent", required=True, help="the agent to run")
    run.add_argument("task", help="the task text")
    run.add_argument("--workspace", type=Path, default=None,
                     help="root of the workspace tools (default: the current directory)")
    demo = commands.add_parser("demo", help="the offline demo on the scripted model")
    serve = commands.add_parser("mcp", help="serve each agent of a specs file as an MCP tool "
                                "over stdio")
    serve.add_argument("specs", type=Path, help="the TOML specs file")
    serve.add_argument("--workspace", type=Path, default=None,
                       help="root of the workspace tools (default: the current directory)")
    serve.add_argument("--yes", action="store_true", help="allow every tool call")
    for sub in (run, demo, serve):
        sub.add_argument("--ledger", type=Path, default=None,
                         help="ledger file (.jsonl, or .sqlite for SQLite); "
                              "default: a new file in the state directory")
        sub.add_argument("--plain", action="store_true", help="plain lines, no live tree")
    gates = run.add_mutually_exclusive_group()
    gates.add_argument("--approve", action="store_true", help="ask on the terminal per tool call")
    gates.add_argument("--yes", action="store_true", help="allow every tool call")
    run.add_argument("--otel", action="store_true",
                     help="export OpenTelemetry traces as the OTEL_* environment variables "
                          "say (needs opentelemetry-sdk and an exporter)")
    gates.add_argument("--approve-later", type=Path, default=None, metavar="FILE",
                       help="calls that may change things wait for approval: the run "
                            "pauses and is stored in FILE")
    add_recover(run, commands)
    resume = commands.add_parser("resume", help="continue a paused run (--approve-later)")
    resume.add_argument("file", type=Path, help="the paused run")
    resume.add_argument("specs", type=Path, help="the TOML specs file it ran with")
    resume.add_argument("--workspace", type=Path, default=None,
                        help="root of the workspace tools (default: the current directory)")
    resume.add_argument("--ledger", type=Path, default=None,
                        help="the ledger file the run wrote (its chain is continued)")
    resume.add_argument("--plain", action="store_true", help="plain lines, no live tree")
    resume.add_argument("--checkpoints", type=Path, default=None, metavar="FILE",
                        help="commit every task's state to this SQLite file (as run does)")
    pending = commands.add_parser("pending", help="list the calls a paused run waits on")
    pending.add_argument("file", type=Path, help="the paused run")
    for verb in ("approve", "deny"):
        sub = commands.add_parser(verb, help=f"{verb} a call a paused run waits on")
        sub.add_argument("file", type=Path, help="the paused run")
        sub.add_argument("call_id", help="the call's id (see pending)")
        sub.add_argument("--reason", default=None, help="why (recorded in the ledger)")
        sub.add_argument("--by", default="", help="who answers (recorded in the ledger)")
        sub.add_argument("--path", default=None,
                         help="the run's path, when several deferred calls share the id")
    add_temporal(commands)
    from ..serve._cli import add_serve

    add_serve(commands)
    return parser


def _paused(state: RunState, state_file: Path | None) -> str:
    # Store the paused run and say how to answer it.
    if state_file is None:
        return f"the run paused: {len(state.pending_approvals)} calls wait for approval"
    store_paused(state_file, state)
    shown = one_line(str(state_file))
    return (
        f"the run paused: {len(state.pending_approvals)} calls wait for approval, "
        f"stored in {shown}\n  subagent pending {shown}\n"
        f"  subagent approve {shown} CALL_ID   (or: subagent deny {shown} CALL_ID "
        f"--reason TEXT)\n  subagent resume {shown} SPECS --ledger LEDGER"
    )


def _answer_command(args: argparse.Namespace, out: TextIO) -> int:
    if args.command == "pending":
        print_pending(read_state(args.file), out)
        return EXIT_OK
    answer(args.file, args.call_id, allow=args.command == "approve", reason=args.reason,
           by=args.by, run_path=args.path)
    return EXIT_OK


def _use_rich(args: argparse.Namespace, out: TextIO) -> bool:
    if args.plain or getattr(args, "approve", False) or not out.isatty():
        return False
    try:
        import rich  # noqa: F401
    except ImportError:
        return False
    return True


def main(argv: Sequence[str] | None = None, *, out: TextIO | None = None) -> int:
    """The command line; returns the exit code. Whatever ends it, standard error gets
    one line (see :mod:`subagent._cli._exit`): never a traceback."""
    with sigterm_as_interrupt() as term:
        try:
            code = _main(argv, out=out)
        except BaseException as exc:
            found = ending(exc, term.fired)
            if found is None:
                raise
            code, text = found
            say(text)
            return code
    if term.fired:  # a command that stops quietly on Ctrl-C (temporal dev, worker)
        say("terminated")
        return EXIT_TERMINATED
    return code


def _main(argv: Sequence[str] | None = None, *, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    args = build_parser().parse_args(argv)
    if args.command == "temporal":
        return run_temporal(args, out)
    if args.command == "serve":
        from ..serve._cli import run_serve

        return run_serve(args, out)
    try:
        if args.command in ("pending", "approve", "deny"):
            return _answer_command(args, out)
    except SubagentError as exc:
        print(f"subagent: {one_line(str(exc))}", file=sys.stderr)
        return EXIT_USAGE
    ledger_path = args.ledger or default_ledger_path()
    rich = _use_rich(args, out)
    screen = Screen(out)
    try:
        if args.command == "demo":
            return trio.run(run_demo, ledger_path, screen, rich)
        workspace = args.workspace or Path.cwd()
        specs = load_specs(args.specs, workspace=workspace)
        if args.command == "mcp":
            from ._mcp import serve_specs_file

            # Standard output is the protocol's: nothing else is printed there.
            serve_gate: ToolGate = allow_all if args.yes else read_only_or_delegation
            serve_specs_file(specs, gate=serve_gate, ledger_path=ledger_path)
            return EXIT_OK
        gate = choose_gate(args, screen)
        if getattr(args, "approve_later", None) is not None:
            check_free(args.approve_later)  # before anything runs, not once it paused
        if args.command == "recover":
            # Opening a missing file would create an empty one: "nothing to recover"
            # from a mistyped path, while the real file waits elsewhere.
            if not args.file.exists():
                raise SubagentError(
                    f"no checkpoint file {args.file}: nothing to recover from")
            if args.ledger is not None and args.ledger.exists():
                ledger.repair(args.ledger)  # a crash may have torn its last line
            return trio.run(
                lambda: run_specs(specs, "", "", gate=gate, ledger_path=ledger_path,
                                  screen=screen, rich=rich, checkpoints=args.file,
                                  recover=True, state_file=args.approve_later)
            )
        if args.command == "resume":
            # Taken (moved to FILE.resumed, under its lock) before anything runs, once
            # the specs can resume it: the same file is not resumed twice.
            state = read_state(args.file)
            return trio.run(
                lambda: run_specs(specs, state.agent, state.input, gate=gate,
                                  ledger_path=ledger_path, screen=screen, rich=rich,
                                  state_file=args.file, resume=args.file,
                                  checkpoints=args.checkpoints)
            )
        tracing = _tracing() if args.otel else None
        try:
            return trio.run(
                lambda: run_specs(specs, args.agent, args.task, gate=gate,
                                  ledger_path=ledger_path, screen=screen, rich=rich,
                                  state_file=args.approve_later,
                                  on_pool=tracing.instrument if tracing else None,
                                  checkpoints=args.checkpoints)
            )
        finally:
            if tracing is not None and not tracing.shutdown():
                print("subagent: --otel: the exporter did not finish in time; "
                      "the last spans may be lost", file=sys.stderr)
    except SubagentError as exc:
        print(f"subagent: {one_line(str(exc))}", file=sys.stderr)
        return EXIT_USAGE
    except ledger.VerifyError as exc:
        print(f"subagent: {one_line(str(exc))}", file=sys.stderr)
        return EXIT_LEDGER


def _tracing() -> EnvironmentTracing:
    # The --otel setup, said on standard error; SubagentError (exit 2) when it cannot export.
    import os

    try:
        from ..otel._environment import tracing_from_environment
    except ImportError:
        raise SubagentError(
            "--otel needs the otel extra: pip install 'subagent[otel]' opentelemetry-sdk"
        ) from None
    tracing = tracing_from_environment(os.environ)
    print(f"subagent: --otel: exporting traces to {', '.join(tracing.exporters)}",
          file=sys.stderr)
    return tracing


async def run_demo(ledger_path: Path, screen: Screen, rich: bool) -> int:
    """Run the demo with a live tree; returns the exit code. A checkpoint."""
    screen.line(f"subagent demo (offline, scripted models)\ntask: {DEMO_TASK}\n{DEMO_PRICING}\n")
    return await run_specs(
        demo_specs(), "coordinator", DEMO_TASK, gate=read_only_or_delegation,
        ledger_path=ledger_path, screen=screen, rich=rich,
    )
