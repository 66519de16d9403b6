"""Benchmarks: `make bench` runs every bench_*.py module's main() in one process, one after another."""
