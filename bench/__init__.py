"""Benchmarks, run by `make bench` (python -m bench [NAME ...]). Not tests: they print a table,
write bench/results/<name>.json, and never gate CI on an absolute time."""
