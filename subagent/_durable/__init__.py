"""Durability: the SQLite checkpoint store (rows, schema, crash-safe writes),
recovery of a crashed pool's tree (its checks, the tree walk, the kept rows of
background children), resumable paused runs and their resume-once claims.

May import: agentcore, ledger, ``subagent._core`` and the leaf values (``_errors``,
``_events``, ``_current``, ``_reply``, ``_stream``); the pool shell and specs only
under ``TYPE_CHECKING`` (``tests/test_layers.py``).
"""
