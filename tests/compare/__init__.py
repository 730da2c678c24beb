"""Tests of run comparison with real runs under the hooks."""
