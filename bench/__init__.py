"""Benchmarks of cdcbox (run by scripts/bench); numbers are ratios measured in one run."""
