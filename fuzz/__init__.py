"""Fuzz harnesses: each input succeeds or raises a documented error, never anything else."""
