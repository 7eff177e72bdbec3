"""Deprecated top-level names: each still imports, with a DeprecationWarning naming
what replaces it (kept for one release). One helper for every package's
``__getattr__`` (PEP 562); ``ledger`` is the package everything else imports.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Mapping


def moved(package: str, name: str, table: Mapping[str, tuple[str, str]]) -> object:
    """The object ``package.name`` now is, after a DeprecationWarning; ``table`` maps
    each old name to (module, name) of its new place.

    Raises:
      AttributeError: ``name`` is not in ``table`` (as a module without it would).
    """
    try:
        module, new = table[name]
    except KeyError:
        raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
    warnings.warn(
        f"{package}.{name} is deprecated: use {module}.{new}", DeprecationWarning, stacklevel=3
    )
    return getattr(importlib.import_module(module), new)
