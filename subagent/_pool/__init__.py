"""The pool's trio shell: ``Pool`` (carrying out the core's effects), the waits of a
run for slots (``_waits``), ``Task``, ``open_pool``, a task's life from start to end
(``_lifecycle``), every step of its end (``_ending``), its events (``_emitter``),
its cancel scope (``_scopes``) and the loop watchdog.

May import the parts below it: ``_core``, ``_cost``, ``_specs``, ``_durable``,
``_delegation``, ``mcp``'s client side, the leaf values (``tests/test_layers.py``).
"""
