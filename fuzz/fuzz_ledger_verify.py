"""ledger verification on arbitrary bytes: a report or a ``LedgerError``, nothing else."""

from __future__ import annotations

import os
import tempfile

import ledger

from ._runner import main

ALLOWED: tuple[type[BaseException], ...] = (ledger.LedgerError,)
_DIR = tempfile.mkdtemp(prefix="fuzz-ledger-")


def target(data: bytes) -> None:
    suffix = ".sqlite" if data[:1] == b"S" else ".jsonl"
    path = os.path.join(_DIR, "ledger" + suffix)
    with open(path, "wb") as f:
        f.write(data[1:])
    report = ledger.verify(path)
    assert report.ok == (report.first_bad is None), report
    assert report.ok or report.problem, report


if __name__ == "__main__":
    main(target, ALLOWED)
