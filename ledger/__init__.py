"""ledger: a tamper-evident audit trail."""
