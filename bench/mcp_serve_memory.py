"""Peak memory of ``subagent mcp`` (the pool as a stdio MCP server) reading one
over-long request line: ``python -m bench.mcp_serve_memory [MiB]`` (default 64) sends a
line of that many MiB, then ``initialize``, and prints the two answers' starts and the
server process's peak RSS (``VmHWM``); ``0`` gives the baseline.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path


def main() -> None:
    mib = int(sys.argv[1]) if len(sys.argv) > 1 else 64
    with tempfile.TemporaryDirectory() as folder:
        specs = Path(folder)
        (specs / "specs.toml").write_text(
            '[agents.greeter]\ndescription = "Greets."\nmodel = "scripted:greeter.json"\n'
        )
        (specs / "greeter.json").write_text('[{"content": "hi"}]')
        process = subprocess.Popen(
            [sys.executable, "-m", "subagent", "mcp", str(specs / "specs.toml"),
             "--ledger", str(specs / "ledger.jsonl")],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=specs,
        )
        assert process.stdin is not None and process.stdout is not None
        initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "bench", "version": "1"}}}
        pad = b"x" * (mib << 20)
        process.stdin.write(b'{"jsonrpc":"2.0","id":9,"method":"ping","pad":"' + pad + b'"}\n')
        process.stdin.write(json.dumps(initialize).encode() + b"\n")
        process.stdin.flush()
        answers = [process.stdout.readline()[:60] for _ in range(2)]
        status = Path(f"/proc/{process.pid}/status").read_text().splitlines()
        peak = next(int(s.split()[1]) for s in status if s.startswith("VmHWM"))
        process.stdin.close()
        process.wait()
    print(f"{mib} MiB line: answers {answers}; peak RSS {peak / 1024:.1f} MB")


if __name__ == "__main__":
    main()
