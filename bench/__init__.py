"""Benchmarks: ``make bench`` (bench/run.py) and the memory probe (bench/memory.py)."""
