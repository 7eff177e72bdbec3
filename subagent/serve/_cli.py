"""``subagent serve SPECS``: the agents of a specs file in a pool served over HTTP by
Hypercorn on trio, with the page. Calls that may change things wait for an answer on
the page (read-only tools and delegation run at once)."""

from __future__ import annotations

import argparse
import ipaddress
import os
import socket
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any, TextIO

import attrs
import trio

import agentcore
import ledger
import subagent

from ._app import TOKEN_VARIABLE, app
from ._gate import approve_on_the_page

#: Exit codes (as the rest of the command line).
EXIT_OK, EXIT_USAGE = 0, 2


def add_serve(commands: Any) -> None:
    """Add the ``serve`` command to the command line's subparsers."""
    serve = commands.add_parser(
        "serve", help="serve a pool over HTTP, with a web page for the live tree and approvals")
    serve.add_argument("specs", type=Path, help="the TOML specs file")
    serve.add_argument("--host", default="127.0.0.1",
                       help="the address to listen on (default 127.0.0.1: this machine only)")
    serve.add_argument("--port", type=_port, default=8700, help="the port (default 8700)")
    serve.add_argument("--checkpoints", type=Path, default=None, metavar="FILE",
                       help="commit every task's state to this SQLite file: a paused tree "
                            "survives a restart, still waiting for its answers")
    serve.add_argument("--ledger", type=Path, default=None, metavar="FILE",
                       help="ledger file (.jsonl, or .sqlite for SQLite); "
                            "default: a new file in the state directory")
    serve.add_argument("--workspace", type=Path, default=None,
                       help="root of the workspace tools (default: the current directory)")


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"a port is 0 to 65535, not {text[:20]!r}")
    return port


def run_serve(args: argparse.Namespace, out: TextIO) -> int:
    """Run ``subagent serve`` until interrupted; returns the exit code."""
    try:
        import hypercorn  # noqa: F401
    except ImportError:
        print("subagent: serve needs the serve extra: pip install 'subagent[serve]'",
              file=sys.stderr)
        return EXIT_USAGE
    try:
        specs = subagent.load_specs(args.specs, workspace=args.workspace or Path.cwd())
        trio.run(partial(serve_specs, specs, host=args.host, port=args.port,
                         checkpoints=args.checkpoints,
                         ledger_path=args.ledger or default_ledger_path(), out=out))
    except BaseException as exc:
        # Out of trio's nurseries, in groups: refused only if every error is one of
        # ours (an interrupt among them is the command line's to say).
        found = _leaves(exc)
        if not all(isinstance(e, subagent.SubagentError | OSError | ledger.LedgerError)
                   for e in found):
            raise
        first = found[0]
        text = first.strerror if isinstance(first, OSError) and first.strerror else str(first)
        print(f"subagent: {' '.join(text.split())[:500]}", file=sys.stderr)
        return EXIT_USAGE
    return EXIT_OK


def _leaves(exc: BaseException) -> list[BaseException]:
    # The exceptions a group holds, flattened, in order.
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


def _bound(host: str, port: int) -> int:
    # A TCP socket bound to host:port as Hypercorn binds one, handed to it by its file
    # descriptor (``fd://``): a bind that fails closes the socket (Hypercorn's own
    # leaves it to the garbage collector) and is said with the address.
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise subagent.SubagentError(
            f"cannot listen on {url_host(host)}:{port}: {exc.strerror or exc}") from None
    return sock.detach()


def default_ledger_path() -> Path:
    """A fresh ledger file in ``$XDG_STATE_HOME/subagent`` (``~/.local/state/subagent``)."""
    state = Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state")
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return state / "subagent" / f"ledger-serve-{stamp}-{os.getpid()}.jsonl"


def open_ledger(path: Path) -> Any:
    """The sink of ``path``: SQLite for ``.sqlite``/``.db``, JSON Lines otherwise (its
    folder made 0700 when missing)."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    if path.suffix in (".sqlite", ".sqlite3", ".db"):
        return ledger.SqliteSink(path)
    return ledger.JsonlSink(path)


def url_host(host: str) -> str:
    """``host`` as it goes in a URL (an IPv6 address in brackets)."""
    try:
        return f"[{host}]" if ipaddress.ip_address(host).version == 6 else host
    except ValueError:
        return host


async def serve_specs(
    specs: subagent.SpecFile, *, host: str, port: int, checkpoints: Path | None,
    ledger_path: Path, out: TextIO, token: str | None = None,
    task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve the agents of ``specs`` until cancelled; started with the server's URL
    once it listens (the token printed once on ``out``). A checkpoint."""
    from hypercorn.config import Config
    from hypercorn.trio import serve

    sink = open_ledger(ledger_path)
    store = subagent.SqliteCheckpoints(checkpoints) if checkpoints is not None else None
    stream = subagent.Stream(1024)
    defaults = attrs.evolve(specs.defaults, gate=approve_on_the_page, audit=sink)
    try:
        async with subagent.open_pool(
            **specs.pool, defaults=defaults, events=stream, mcp=specs.mcp,  # type: ignore[arg-type]
            budget=specs.budget, checkpoints=store,
        ) as pool:
            tools: dict[str, agentcore.Tool] = {
                "subagent": subagent.SubagentTool(pool),
                "subagent_results": subagent.SubagentResultsTool(pool),
            }
            for spec in specs.specs_for(tools, pool.mcp_tools):
                pool.register(spec)
            application = app(pool, token=token, budget=specs.budget)
            config = Config()
            config.bind = [f"fd://{_bound(host, port)}"]
            config.accesslog = None
            config.loglevel = "WARNING"
            config.graceful_timeout = 1.0
            try:
                async with trio.open_nursery() as nursery:
                    asgi: Any = application  # Hypercorn's typing of an ASGI app is narrower
                    binds = await nursery.start(partial(serve, asgi, config))
                    if application.startup_error is not None:
                        # Hypercorn binds once the lifespan has ended, failed or not.
                        raise subagent.SubagentError(application.startup_error)
                    url = binds[0] + "/"
                    shown = url if os.environ.get(TOKEN_VARIABLE) or token else (
                        f"{url}#token={application.token}")
                    print(f"subagent serve: {url}\n  open {shown}\n  ledger: {ledger_path}",
                          file=out, flush=True)
                    if not ipaddress.ip_address(binds[0].split("//")[1].rsplit(":", 1)[0]
                                                .strip("[]")).is_loopback:
                        print("subagent serve: listening beyond this machine: anyone who has "
                              "the token can run and approve tasks", file=out, flush=True)
                    task_status.started(url)
            except BaseExceptionGroup:
                # With Hypercorn's LifespanFailureError, out of its nurseries: the
                # app's startup failed, and said why.
                if application.startup_error is None:
                    raise
                raise subagent.SubagentError(application.startup_error) from None
    finally:
        stream.close()
        await sink.aclose()
        if store is not None:
            await store.aclose()
