"""The asyncio hosts of issue 37, for real: the FastAPI example served by uvicorn's
command on 127.0.0.1 (its SSE stream over a socket, then a Ctrl-C that closes the
pool through the app's lifespan), and a top-level ``async with`` in Python's own
asyncio REPL, as in a notebook cell."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_the_fastapi_example_streams_a_tree_over_uvicorn() -> None:
    server = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "examples.aio_fastapi:app", "--loop", "asyncio",
         "--host", "127.0.0.1", "--port", "0"],
        cwd=ROOT, stderr=subprocess.PIPE, text=True)
    try:
        assert server.stderr is not None
        port = None
        for line in server.stderr:
            found = re.search(r"http://127\.0\.0\.1:(\d+)", line)
            if found:
                port = int(found.group(1))
                break
        assert port is not None
        events, answer = [], None
        with httpx.stream("GET", f"http://127.0.0.1:{port}/ask", params={"q": "a trip"},
                          timeout=30) as response:
            assert response.headers["content-type"].startswith("text/event-stream")
            for line in response.iter_lines():
                if line.startswith("data: "):
                    data = json.loads(line[6:])
                    if isinstance(data, dict):
                        events.append(("/".join(data["path"]), data["kind"]))
                    else:
                        answer = data
        assert events[0] == ("lead/0001", "task_queued")
        assert events[-1] == ("lead/0001", "task_finished")
        assert ("lead/0001/researcher/0002", "task_finished") in events
        assert answer == ('plan, using {"agent": "researcher", "path": ["lead/0001", '
                          '"researcher/0002"], "output": "notes on a trip"}')
        server.send_signal(signal.SIGINT)
        rest = server.communicate(timeout=30)[1]
        assert server.returncode == 0
        assert "Application shutdown complete." in rest
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
        if server.stderr is not None:
            server.stderr.close()


@pytest.mark.slow
def test_a_top_level_async_with_in_the_asyncio_repl() -> None:
    cell = (
        "import subagent, subagent.aio\n"
        "from agentcore.testing import ScriptedModel\n"
        "model = ScriptedModel(['hello from a subagent'])\n"
        "async with subagent.aio.open_pool(defaults=subagent.Defaults(model=model)) as pool:\n"
        "    pool.register(subagent.Spec(name='w', description='works'))\n"
        "    task = await pool.submit('w', 'hi')\n"
        "    print('OUT', (await task.wait()).output)\n"
        "\n"
        "print('FINISHED', pool.statistics().finished)\n"
    )
    done = subprocess.run([sys.executable, "-m", "asyncio"], input=cell, text=True,
                          capture_output=True, timeout=60, cwd=ROOT, check=False)
    assert done.returncode == 0, done.stderr
    assert "OUT hello from a subagent" in done.stderr + done.stdout
    assert "FINISHED 1" in done.stderr + done.stdout
