"""ledger: a tamper-evident audit trail.

Entries are redacted, numbered and chained by SHA-256 hashes, so that any
change, insertion, deletion or reordering is found by :func:`verify`, and
entries cut from the end or a rolled-back file by ``verify(path, head=...)``
with a head recorded earlier. The core (entries, encoding, chain,
verification, redaction) is pure and does not import trio; the sinks record
from trio tasks, create their files 0600, and one sink at a time writes a
ledger.
"""

from . import encoding as encoding
from ._chain import Chain as Chain
from ._check import ChainCheck as ChainCheck
from ._check import Flaw as Flaw
from ._check import Problem as Problem
from ._check import check_chain as check_chain
from ._deprecated import moved as _moved
from ._entry import Entry as Entry
from ._entry import EntryKind as EntryKind
from ._entry import Record as Record
from ._errors import LedgerError as LedgerError
from ._errors import SinkClosedError as SinkClosedError
from ._errors import SinkError as SinkError
from ._errors import VerifyError as VerifyError
from ._jsonl import JsonlSink as JsonlSink
from ._memory import MemorySink as MemorySink
from ._query import query as query
from ._query import tail as tail
from ._redact import REDACTED as REDACTED
from ._redact import redact as redact
from ._redact import redact_record as redact_record
from ._sink import Sink as Sink
from ._sink import SinkStatistics as SinkStatistics
from ._sqlite import SqliteSink as SqliteSink
from ._verify import VerifyReport as VerifyReport
from ._verify import repair as repair
from ._verify import verify as verify

# Old top-level names, kept for one release: each warns and names its new place.
_MOVED = {
    "GENESIS": ("ledger.encoding", "GENESIS"),
    "canonical_body": ("ledger.encoding", "canonical_body"),
    "decode_line": ("ledger.encoding", "decode_line"),
    "encode_entry": ("ledger.encoding", "encode_entry"),
    "entry_hash": ("ledger.encoding", "entry_hash"),
}


def __getattr__(name: str) -> object:
    return _moved("ledger", name, _MOVED)
