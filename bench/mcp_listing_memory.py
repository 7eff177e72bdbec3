"""Peak memory of reading one hostile ``tools/list`` reply over stdio: a line just
under the 4 MiB message bound made of small JSON values (``[{},{},...]`` in a schema),
sent by tests/subagent/mcp/hostile_stdio.py.

``python -m bench.mcp_listing_memory`` prints the tracemalloc peak (this process's
Python allocations while the pool opens, after a first pool with a small listing
has imported the SDK; the server's start failing or not);
``--rss`` prints the process's peak RSS instead, measured without tracemalloc.
"""

from __future__ import annotations

import resource
import sys
import tracemalloc
from pathlib import Path

import trio

from subagent import open_pool
from subagent.mcp import McpServer

SERVER = Path(__file__).parent.parent / "tests" / "subagent" / "mcp" / "hostile_stdio.py"
#: Bytes of ``[{},{},...]`` in the reply: the line stays under 4 MiB (MAX_MESSAGE).
SIZE = 4 * 1024 * 1024 - 200


async def listing(size: int = SIZE) -> bool:
    server = McpServer("many", command=sys.executable, args=(str(SERVER), "values", str(size)),
                       start_timeout=60.0)
    async with open_pool(mcp=[server]) as pool:
        assert pool.mcp is not None
        return pool.mcp.is_up("many")


def main() -> None:
    # A small listing first: the SDK's imports and first-use caches are not counted.
    trio.run(listing, 100)
    size = int(sys.argv[sys.argv.index("--size") + 1]) if "--size" in sys.argv else SIZE
    if "--rss" in sys.argv:
        # No tracemalloc (it adds its own memory): the peak RSS, against the one
        # before the pool opened.
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        up = trio.run(listing, size)
        after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"server up: {up}; peak RSS {after:.1f} MB ({after - before:+.1f} MB while open)")
        return
    tracemalloc.start()
    up = trio.run(listing, size)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(f"server up: {up}; tracemalloc peak {peak / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
