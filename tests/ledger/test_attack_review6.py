"""Review 6: a ledger's one-writer lock is the database file's, not its name's."""

from __future__ import annotations

from pathlib import Path

import pytest

from ledger import Record, SinkError, SqliteSink
from ledger._files import LOCKED


async def test_a_second_ledger_writer_through_a_symlink_is_refused(tmp_path: Path) -> None:
    db, link = tmp_path / "audit.db", tmp_path / "link.db"
    link.symlink_to(db)
    first = SqliteSink(db)
    await first.record(Record("prompt"))
    second = SqliteSink(link)
    with pytest.raises(SinkError) as info:
        await second.record(Record("prompt"))
    await second.aclose()
    assert (await first.record(Record("run_end"))).seq == 2  # the holder goes on
    await first.aclose()
    assert str(info.value).endswith(LOCKED)
