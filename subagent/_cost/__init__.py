"""Budgets: the values (``Budget``, ``Spend``, ``BudgetReport``) and the pure
meter that does the accounting of a budgeted subtree (``_budget``), and the trio
side (``_shell``) that checks and charges every model call of a budgeted task,
reports, and stops a spent subtree.

May import: agentcore, ledger, ``subagent._core`` and the leaf values
(``_errors``, ``_events``); other parts only under ``TYPE_CHECKING``
(``tests/test_layers.py``).
"""
