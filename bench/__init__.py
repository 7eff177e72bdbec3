"""Benchmarks: this library against bare trio, in the same process run."""
