"""Benchmark of the live adapter and the watch cache (not part of the test suite)."""
