# frontend/ids.py — every component id of the Dash app, shared by callbacks and browser tests.
"""Stable component ids (they are also the DOM ids browser tests select on)."""

# App shell (frontend/app.py).
REFRESH_INTERVAL = "refresh-interval"  # dcc.Interval ticking every refresh_ms (Fabric page)
REFRESH_BASE_MS = "refresh-base-ms"  # dcc.Store: the configured refresh period (ms)
URL = "url"  # dcc.Location the pages navigate with (a job's own URL)

# Jobs page (frontend/pages/jobs.py).
JOB_REFRESH = "job-refresh"  # dcc.Interval: the refresh tick (its period backs off under load)
CLOCK = "clock"  # dcc.Interval, every second: the "N s behind" label, in the browser only
STATUS_MESSAGE = "status-message"  # "no jobs yet" / "unknown job" notice; empty when all is well
LAST_UPDATED = "last-updated"  # "updated HH:MM:SS UTC", or "refreshing… N s behind"
LAST_GOOD = "last-good"  # dcc.Store: {"at": ms since the epoch of the last whole refresh, ...}
JOB_VIEW = "job-view"  # dcc.Store: what the page's URL asks for (frontend.pages.jobs.JobView)
JOB_SEARCH = "job-search"  # dcc.Input: searches job id, user and command (server side)
JOB_STATUS_FILTER = "job-status-filter"  # dcc.Dropdown: one status or all
JOB_USER_FILTER = "job-user-filter"  # dcc.Input: one user or all
JOB_STARTED_FROM = "job-started-from"  # dcc.Input (UTC, "2026-12-01 19:30"): started at/after
JOB_STARTED_TO = "job-started-to"  # dcc.Input (UTC, "2026-12-01 19:30"): started before
JOB_PAGES = "job-pages"  # dcc.Store: cursors of the job list pages up to the one shown
JOB_NEXT_CURSOR = "job-next-cursor"  # dcc.Store: next_cursor of the page shown (None: last)
JOB_NEWER = "job-newer"  # button: the previous (newer) page of the job list
JOB_OLDER = "job-older"  # button: the next (older) page of the job list
JOB_PAGE_INFO = "job-page-info"  # "jobs 1–100 of 20,000"
JOBS_GRID = "jobs-grid"  # dash-ag-grid, a row per job of the page (row id = job id)
JOBS_ERROR = "jobs-error"  # the jobs card's error message; empty when all is well
RENDERED_DIGEST = "rendered-digest"  # dcc.Store: digest per card of what it shows (skip redraws)
SCROLLED = "scrolled"  # dcc.Store: the job whose view was last scrolled into sight
JOB_DETAILS = "job-details"  # wraps every card about the shown job; hidden without one
MATRIX_SECTION = "matrix-section"  # "Point-to-point traffic" card of the shown job
MATRIX_TITLE = "matrix-title"  # heading naming the shown job
MATRIX_HEATMAP = "matrix-heatmap"  # dcc.Graph, rank x rank heatmap of point-to-point bytes
MATRIX_CAPTION = "matrix-caption"  # how many rank pairs the grid holds of how many
MATRIX_GRID = "matrix-grid"  # dash-ag-grid, a row per (src, dst) pair with traffic
OPS_SECTION = "ops-section"  # "MPI operations" card of the shown job
OPS_SUMMARY = "ops-summary"  # one line: time and bytes per traffic category
OPS_TABLE = "ops-table"  # dcc.Markdown: caption + <table> of the ops called, heaviest time first
IO_SECTION = "io-section"  # "File-system I/O" card of the shown job
IO_CAPTION = "io-caption"  # how many files the grid holds of how many, or "no file I/O"
IO_GRID = "io-grid"  # dash-ag-grid, a row per (layer, path)
COLL_SECTION = "coll-section"  # "Collectives" card of the shown job
COMM_TABLE = "comm-table"  # dcc.Markdown: caption + <table> per communicator, or "no collective"
COLL_TABLE = "coll-table"  # dcc.Markdown: caption + <table> per (communicator, op, root)
SIZES_SECTION = "sizes-section"  # "Message sizes" card of the shown job
SIZES_GRAPH = "sizes-graph"  # dcc.Graph, messages per log2 size bucket, a bar trace per op
SIZES_TABLE = "sizes-table"  # dcc.Markdown: caption + <table> per (op, bucket)
RMA_SECTION = "rma-section"  # "One-sided (RMA)" card of the shown job
RMA_CAPTION = "rma-caption"  # the RMA totals per op, or "no RMA"
RMA_GRID = "rma-grid"  # dash-ag-grid, a row per (origin, target) pair
RANKS_SECTION = "ranks-section"  # "Ranks" card of the shown job
RANKS_SUMMARY = "ranks-summary"  # one line: ranks reported, hosts, health warnings
RANKS_TABLE = "ranks-table"  # dcc.Markdown: caption + <table> per rank (host, pid, health)
# Each card of the shown job: its error message, empty when its last refresh went well.
CARD_ERRORS = {
    "matrix": "matrix-error",
    "ops": "ops-error",
    "collectives": "coll-error",
    "sizes": "sizes-error",
    "rma": "rma-error",
    "io": "io-error",
    "ranks": "ranks-error",
}

# Fabric page (frontend/pages/fabric.py).
FABRIC_STATUS = "fabric-status"  # error / "no fabric yet" notice; empty when all is well
FABRIC_UPDATED = "fabric-updated"  # time of the last successful refresh
FABRIC_SUMMARY = "fabric-summary"  # one line: nodes, links, down, with errors, busiest
FABRIC_GRAPH = "fabric-graph"  # dash-cytoscape topology (node ids = GUIDs, links "link-<id>")
FABRIC_HOVER = "fabric-hover"  # one line about the link or node under the mouse
FABRIC_LINKS_TABLE = "fabric-links-table"  # dcc.Markdown: erroring, down, then busiest links
FABRIC_EVENTS_TABLE = "fabric-events-table"  # dcc.Markdown: newest fabric events
FABRIC_TOPOLOGY_DIGEST = "fabric-topology-digest"  # dcc.Store: digest of the drawn topology
FABRIC_RENDERED_DIGEST = "fabric-rendered-digest"  # dcc.Store: digest of what the page shows
