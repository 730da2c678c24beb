# frontend/ids.py — every component id of the Dash app, shared by callbacks and browser tests.
"""Stable component ids (they are also the DOM ids browser tests select on)."""

# App shell (frontend/app.py).
REFRESH_INTERVAL = "refresh-interval"  # dcc.Interval ticking every refresh_ms

# Jobs page (frontend/pages/jobs.py).
STATUS_MESSAGE = "status-message"  # error / "no jobs yet" notice; empty when all is well
LAST_UPDATED = "last-updated"  # time of the last successful refresh
JOBS_TABLE = "jobs-table"  # html.Table, one <tr data-job="..."> per job
JOB_ROW = "job-row"  # pattern-matching id type of a jobs-table row: {"type": JOB_ROW, "job": key}
SELECTED_JOB = "selected-job"  # dcc.Store: the job key the user clicked (None: follow newest)
RENDERED_DIGEST = "rendered-digest"  # dcc.Store: digest of the data the page shows (skip redraws)
JOB_DETAILS = "job-details"  # wraps every card about the shown job; hidden without one
MATRIX_SECTION = "matrix-section"  # "Point-to-point traffic" card of the shown job
MATRIX_TITLE = "matrix-title"  # heading naming the shown job
MATRIX_HEATMAP = "matrix-heatmap"  # dcc.Graph, rank x rank heatmap of point-to-point bytes
MATRIX_TABLE = "matrix-table"  # dcc.Markdown: caption + <table> of non-zero (src, dst) cells
OPS_SECTION = "ops-section"  # "MPI operations" card of the shown job
OPS_SUMMARY = "ops-summary"  # one line: time and bytes per traffic category
OPS_TABLE = "ops-table"  # dcc.Markdown: caption + <table> of the ops called, heaviest time first
IO_SECTION = "io-section"  # "File-system I/O" card of the shown job
IO_TABLE = "io-table"  # dcc.Markdown: caption + <table> per (layer, path), or "no file I/O"
COLL_SECTION = "coll-section"  # "Collectives" card of the shown job
COMM_TABLE = "comm-table"  # dcc.Markdown: caption + <table> per communicator, or "no collective"
COLL_TABLE = "coll-table"  # dcc.Markdown: caption + <table> per (communicator, op, root)
SIZES_SECTION = "sizes-section"  # "Message sizes" card of the shown job
SIZES_GRAPH = "sizes-graph"  # dcc.Graph, messages per log2 size bucket, a bar trace per op
SIZES_TABLE = "sizes-table"  # dcc.Markdown: caption + <table> per (op, bucket)
RMA_SECTION = "rma-section"  # "One-sided (RMA)" card of the shown job
RMA_TABLE = "rma-table"  # dcc.Markdown: caption + <table> per (origin, target), or "no RMA"
RANKS_SECTION = "ranks-section"  # "Ranks" card of the shown job
RANKS_SUMMARY = "ranks-summary"  # one line: ranks reported, hosts, health warnings
RANKS_TABLE = "ranks-table"  # dcc.Markdown: caption + <table> per rank (host, pid, health)

# Fabric page (frontend/pages/fabric.py).
FABRIC_STATUS = "fabric-status"  # error / "no fabric yet" notice; empty when all is well
FABRIC_UPDATED = "fabric-updated"  # time of the last successful refresh
FABRIC_SUMMARY = "fabric-summary"  # one line: nodes, links, down, with errors, busiest
FABRIC_GRAPH = "fabric-graph"  # dash-cytoscape topology (node ids = GUIDs, links "link-<id>")
FABRIC_HOVER = "fabric-hover"  # one line about the link or node under the mouse
FABRIC_LINKS_TABLE = "fabric-links-table"  # dcc.Markdown: erroring, down, then busiest links
FABRIC_EVENTS_TABLE = "fabric-events-table"  # dcc.Markdown: newest fabric events
FABRIC_STATE = "fabric-state"  # dcc.Store: the shared fabric state of the newest sweep
FABRIC_TOPOLOGY_ETAG = "fabric-topology-etag"  # dcc.Store: ETag of the topology (redraw on change)
FABRIC_EXPANDED = "fabric-expanded"  # dcc.Store: leaf GUIDs whose host group is expanded
FABRIC_FOLDED = "fabric-folded"  # dcc.Store: whether the graph shows the aggregated view
FABRIC_FOCUS = "fabric-focus"  # dcc.Store: GUID of the node the search asks to focus
FABRIC_FOCUSED = "fabric-focused"  # dcc.Store: GUID of the node focused (after drawing)
FABRIC_PAINT_CONFIG = "fabric-paint-config"  # dcc.Store: colours and scale for fabric.js
FABRIC_SEARCH = "fabric-search"  # search box: host, switch or GUID
FABRIC_SEARCH_MESSAGE = "fabric-search-message"  # what the search found not
FABRIC_FILTER = "fabric-filter"  # radio: all / hot / erroring / down links
FABRIC_SCALE = "fabric-scale"  # radio: log / quantile colour scale
FABRIC_TABLE_INTERVAL = "fabric-table-interval"  # dcc.Interval of the tables (slower)
