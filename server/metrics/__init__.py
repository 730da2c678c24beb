"""Metrics domain: Prometheus exposition of the collector's counters."""
