"""Benchmarks run by `make bench`: they print figures and ratios against targets, never assert timings in tests."""
