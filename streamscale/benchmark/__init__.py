"""Benchmarking method concern: specs, search strategies, isolated experiments, results."""
