"""Fabric sampler: topology discovery and port counters from swappable sources.

Every source (mad, sysfs, replay; verbs for local port attributes) offers `discover()`
(a Topology, or None when it has no fabric view) and `sweep()` (a RawSweep in bytes), so
the rest of the system does not know where counters came from.
"""
