"""The pool's rules without I/O (sans-IO, like h11's state machine): the tree of
task nodes, their states and legal transitions, admission and the queue,
concurrency slots lent and taken back, fan-out slots, background delivery, usage
roll-up, and the counters of ``Pool.statistics()``. Each method checks, changes,
and returns the effects for the trio shell (``subagent._pool``) to carry out.

May import: ``subagent._errors`` only (no trio, no agentcore). The import rules
between subagent's parts are written down and checked in ``tests/test_layers.py``.
"""
