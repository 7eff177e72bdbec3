"""The page in a real browser: Debian's headless chromium driven by Playwright (the
system browser, none downloaded). A scripted tree pauses on a write; the page shows
the exact call; a click on Approve runs it once and the tree turns done. A model's
answer holding markup shows as text."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
import trio

from ._served import TOKEN, Notes, running, tree_specs, wait_for

CHROMIUM = Path("/usr/bin/chromium")
HOSTILE = '<script>window.pwned = 1</script><img src=x onerror="window.pwned = 2"><b>bold</b>'

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not CHROMIUM.exists(),
                       reason="no /usr/bin/chromium (apt-get install chromium)"),
]


def drive(url: str, notes: Notes, shots: Path) -> dict[str, Any]:
    """In a worker thread: open the page, check the call shown, approve it."""
    from playwright.sync_api import sync_playwright

    seen: dict[str, Any] = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1100, "height": 820})
            problems: list[str] = []
            page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: problems.append(str(e)))
            page.goto(f"{url}/#token={TOKEN}")
            card = page.locator(".approval")
            card.wait_for()
            seen["hash"] = page.evaluate("location.hash")
            seen["call"] = card.locator(".call").text_content()
            seen["arguments"] = json.loads(card.locator("pre.arguments").text_content() or "")
            page.locator('tr[data-path="lead/0001/writer/0002"]').wait_for()
            seen["written_before"] = list(notes.written)
            page.fill("#by", "dana")
            page.locator('tr[data-path="lead/0001/writer/0002"]').click()
            page.screenshot(path=str(shots / "serve-paused.png"))
            card.locator("button.approve").click()
            page.locator('tr[data-path="lead/0001"] td.status-done').wait_for()
            page.locator('tr[data-path="lead/0001/writer/0002"] td.status-done').wait_for()
            page.locator(".approval").wait_for(state="detached")
            talker = page.locator('[data-task="talker/0004"] .output')
            talker.wait_for()
            seen["talker_text"] = talker.text_content()
            seen["talker_elements"] = talker.locator("*").count()
            seen["pwned"] = page.evaluate("window.pwned === undefined ? null : window.pwned")
            page.locator('[data-task="lead/0001"] .output').wait_for()
            seen["lead_output"] = page.locator('[data-task="lead/0001"] .output').text_content()
            page.screenshot(path=str(shots / "serve-done.png"), full_page=True)
            seen["problems"] = problems
        finally:
            browser.close()
    return seen


async def test_the_page_approves_a_paused_write_once_and_shows_markup_as_text(
    tmp_path: Path,
) -> None:
    pytest.importorskip("playwright")
    notes = Notes()
    async with running(tree_specs(notes, HOSTILE)) as served, served.client() as client:
        await client.post("/api/tasks", json={"agent": "lead", "text": "write the note"})
        await client.post("/api/tasks", json={"agent": "writer", "text": "unused"})
        await wait_for(client, "/api/approvals", lambda d: len(d["approvals"]) == 2)
        # Only the lead's tree is answered on the page: deny the other one here.
        denied = await client.post("/api/approvals/deny",
                                   json={"tree": "writer/0003", "call_id": "w1"})
        assert denied.json() == {"resumed": "writer/0003", "waiting": 0}
        talker = await client.post("/api/tasks", json={"agent": "talker", "text": "say it"})
        assert talker.json()["id"] == "talker/0004"
        seen = await trio.to_thread.run_sync(drive, served.url, notes, tmp_path)
        done = await wait_for(client, "/api/tasks/lead/0001", lambda d: d["status"] == "finished")
    assert seen["hash"] == ""  # the token left the address bar
    assert seen["call"] == "write_note from lead/0001 / writer/0002  (call w1)"
    assert seen["arguments"] == {"text": "hello"}
    assert seen["written_before"] == []
    assert notes.written == ["hello"]
    assert done["output"] == seen["lead_output"] == (
        'the writer says: {"agent": "writer", "path": ["lead/0001", "writer/0002"], '
        '"output": "done: wrote hello"}')
    assert (seen["talker_text"], seen["talker_elements"], seen["pwned"]) == (HOSTILE, 0, None)
    assert seen["problems"] == []
    assert (tmp_path / "serve-done.png").stat().st_size > 10_000
    keep = os.environ.get("SUBAGENT_SCREENSHOTS")
    if keep:  # a folder to keep the screenshots in (docs/serve.png is one of them)
        for name in ("serve-paused.png", "serve-done.png"):
            shutil.copy(tmp_path / name, Path(keep) / name)
