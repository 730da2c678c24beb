"""stacklens server: the FastAPI query API (the command line mounts the dashboard beside it)."""
