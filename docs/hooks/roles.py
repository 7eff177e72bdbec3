"""A mkdocs hook: the docstrings' Sphinx roles (:class:`X`, :func:`~a.b`) read as code.

The docstrings name things the way Sphinx does; mkdocstrings renders the backquoted
part as code and leaves the role in front of it. This takes the role (and a leading
``~``) away.
"""

from __future__ import annotations

import re

_ROLE = re.compile(r":(?:class|func|meth|data|attr|exc|mod|obj|const|py:\w+):<code>~?")


def on_page_content(html: str, **kwargs: object) -> str:
    return _ROLE.sub("<code>", html)
