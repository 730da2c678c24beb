# frontend/pages/__init__.py — one module per page; Dash imports them and they call register_page.
"""Pages of the stacklens Dash app.

Each page module calls `dash.register_page` and defines `register_callbacks(dash_app)`, which
`frontend.app.create_dash_app` calls: callbacks are attached per app with `dash_app.callback`
rather than the global `dash.callback`, whose registry would be shared by every app created in
one process.
"""
