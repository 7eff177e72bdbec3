"""ledger: a tamper-evident audit trail.

Entries are redacted, numbered and chained by SHA-256 hashes, so that any
change, insertion, deletion or reordering is found by :func:`verify`, and
entries cut from the end or a rolled-back file by ``verify(path, head=...)``
with a head recorded earlier. The core (entries, encoding, chain,
verification, redaction) is pure and does not import trio; the sinks record
from trio tasks, create their files 0600, and one sink at a time writes a
ledger.
"""

from ._chain import Chain as Chain
from ._check import ChainCheck as ChainCheck
from ._check import Flaw as Flaw
from ._check import Problem as Problem
from ._check import check_chain as check_chain
from ._encoding import GENESIS as GENESIS
from ._encoding import canonical_body as canonical_body
from ._encoding import decode_line as decode_line
from ._encoding import encode_entry as encode_entry
from ._encoding import entry_hash as entry_hash
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
