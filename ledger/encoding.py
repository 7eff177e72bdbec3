"""The ledger's canonical encoding, as ``msgspec.json`` is msgspec's: one entry's
canonical body, its line in a JSONL ledger, its hash, and the hash before the first
entry (:data:`GENESIS`). For tools that read or write ledgers without a sink.
"""

from ._encoding import GENESIS as GENESIS
from ._encoding import canonical_body as canonical_body
from ._encoding import decode_line as decode_line
from ._encoding import encode_entry as encode_entry
from ._encoding import entry_hash as entry_hash
