# frontend/__init__.py — the stacklens web UI: a Dash pages app that reads the server's HTTP API.
"""stacklens web frontend (Plotly Dash); build it with `frontend.app.create_dash_app`,
serve it beside the API with `frontend.app.mount_dashboard`."""
