"""stacklens server: the FastAPI query API (and the host of the Dash frontend)."""
