"""Ratio benchmarks against baselines measured in the same run (``make bench``)."""
