"""stacklens: cross-stack HPC communication profiler (CLI, settings, wire, schema)."""

__version__ = "0.1.0"
