# frontend/ids.py — every component id of the Dash app, shared by callbacks and browser tests.
"""Stable component ids (they are also the DOM ids browser tests select on)."""

# App shell (frontend/app.py).
REFRESH_INTERVAL = "refresh-interval"  # dcc.Interval ticking every refresh_ms (Fabric page)
REFRESH_BASE_MS = "refresh-base-ms"  # dcc.Store: the configured refresh period (ms)
URL = "url"  # dcc.Location the pages navigate with (to a job's own page)
MODE_FOOTER = "mode-footer"  # footer of every page: ingest and auth modes, users sending
MODE_WARNING = "mode-warning"  # the footer's warning of trusted ingest with several users
MODE_TICK = "mode-tick"  # dcc.Interval: the footer's refresh

# Jobs page (frontend/pages/jobs.py).
JOB_REFRESH = "job-refresh"  # dcc.Interval: the refresh tick (its period backs off under load)
CLOCK = "clock"  # dcc.Interval, every second: the "N s behind" label, in the browser only
STATUS_MESSAGE = "status-message"  # "no jobs yet" / "unknown job" notice; empty when all is well
LAST_UPDATED = "last-updated"  # "updated HH:MM:SS UTC", or "refreshing… N s behind"
LAST_GOOD = "last-good"  # dcc.Store: {"at": ms since the epoch of the last whole refresh, ...}
JOB_SEARCH = "job-search"  # dmc.TextInput: searches job id, user and command (server side)
JOB_STATUS_FILTER = "job-status-filter"  # dmc.Select: one status or all
JOB_USER_FILTER = "job-user-filter"  # dmc.TextInput: one user or all
JOB_WINDOW = "job-window"  # dcc.Store: the URL's time range (jobs started in it)
JOB_PAGES = "job-pages"  # dcc.Store: cursors of the job list pages up to the one shown
JOB_NEXT_CURSOR = "job-next-cursor"  # dcc.Store: next_cursor of the page shown (None: last)
JOB_NEWER = "job-newer"  # dmc.Button: the previous (newer) page of the job list
JOB_OLDER = "job-older"  # dmc.Button: the next (older) page of the job list
JOB_PAGE_INFO = "job-page-info"  # "jobs 1–100 of 20,000"
JOBS_GRID = "jobs-grid"  # dash-ag-grid, a row per job of the page (row id = job id)
JOBS_ERROR = "jobs-error"  # the jobs card's error message; empty when all is well
RENDERED_DIGEST = "rendered-digest"  # dcc.Store: digest per card of what it shows (skip redraws)
JOB_DETAILS = "job-details"  # wraps every card about the shown job; hidden without one
SHOWN_JOB = "shown-job"  # heading naming the shown job (a link to its page)
# The job cards' ids (the same on the job page): presentation/cards.py (card_id, part_id).

# Fabric page (frontend/pages/fabric.py).
FABRIC_STATUS = "fabric-status"  # error / "no fabric yet" notice; empty when all is well
FABRIC_DRAW_MESSAGE = "fabric-draw-message"  # why the graph could not be drawn; empty when drawn
FABRIC_UPDATED = "fabric-updated"  # time of the last successful refresh
FABRIC_SUMMARY = "fabric-summary"  # one line: nodes, links, down, with errors, busiest
FABRIC_GRAPH = "fabric-graph"  # dash-cytoscape topology (node ids = GUIDs, links "link-<id>")
FABRIC_HOVER = "fabric-hover"  # one line about the link or node under the mouse
FABRIC_LINKS_GRID = "fabric-links-grid"  # dash-ag-grid: a page of the links (row id = link id)
FABRIC_GROUPS_GRID = (
    "fabric-groups-grid"  # dash-ag-grid: groups of parallel links (row id = group id)
)
FABRIC_GROUPS_CAPTION = "fabric-groups-caption"  # "12 groups ..., highest skew first; legend"
FABRIC_LINKS_CAPTION = "fabric-links-caption"  # "links 1–100 of 3,584, busiest first, over ..."
FABRIC_LINKS_SORT = "fabric-links-sort"  # dmc.SegmentedControl: busiest first / most errors first
FABRIC_LINKS_NEWER = "fabric-links-newer"  # dmc.Button: the previous page of the links
FABRIC_LINKS_OLDER = "fabric-links-older"  # dmc.Button: the next page of the links
FABRIC_LINKS_PAGES = "fabric-links-pages"  # dcc.Store: cursors of the pages up to the one shown
FABRIC_LINKS_NEXT = "fabric-links-next"  # dcc.Store: next_cursor of the page shown (None: last)
FABRIC_VIEW = "fabric-view"  # dcc.Store: the view in the URL (window, at/step, job, focus)
FABRIC_SLIDER = "fabric-playback"  # dmc.Slider over the window's steps (epoch s of a step)
FABRIC_PLAY = "fabric-play"  # button: play / pause the playback
FABRIC_LIVE = "fabric-live"  # button: leave the playback, back to the newest sweep
FABRIC_PLAYING = "fabric-playing"  # dcc.Store: whether the playback runs
FABRIC_PLAYBACK_SHOWN = "fabric-playback-shown"  # "live: newest sweep" or the step replayed
FABRIC_FRESHNESS = "fabric-freshness"  # how old the last sweep is; "STALE ..." when stale
FABRIC_SELECTED = "fabric-selected"  # dcc.Store: the clicked link or node ({kind, id, label})
FABRIC_PANEL = "fabric-panel"  # the detail panel beside the graph (class "open" / "closed")
FABRIC_PANEL_TITLE = "fabric-panel-title"  # "link a[p] - b[q]" or "node <name>"
FABRIC_PANEL_TICK = "fabric-panel-tick"  # dcc.Store: the table tick while a panel is open
FABRIC_PANEL_CLOSE = "fabric-panel-close"  # dmc.ActionIcon: close the panel
FABRIC_PANEL_STATUS = "fabric-panel-status"  # the panel's error; empty when all is well
FABRIC_PANEL_SERIES = "fabric-panel-series"  # holds a dcc.Graph: counters per step, events marked
FABRIC_PANEL_EVENTS = "fabric-panel-events"  # dcc.Markdown: its events over the window
FABRIC_PANEL_JOBS = "fabric-panel-jobs"  # dcc.Markdown: the jobs on it
FABRIC_EVENTS_TABLE = "fabric-events-table"  # dcc.Markdown: newest fabric events
FABRIC_STATE = "fabric-state"  # dcc.Store: the shared fabric state of the newest sweep
FABRIC_TOPOLOGY_ETAG = "fabric-topology-etag"  # dcc.Store: ETag of the topology (redraw on change)
FABRIC_EXPANDED = "fabric-expanded"  # dcc.Store: leaf GUIDs whose host group is expanded
FABRIC_DRAWN = "fabric-drawn"  # dcc.Store: what the graph shows ({etag, expanded, elements})
FABRIC_FOLDED = "fabric-folded"  # dcc.Store: whether the graph shows the aggregated view
FABRIC_FOCUS = "fabric-focus"  # dcc.Store: GUID of the node the search asks to focus
FABRIC_FOCUSED = "fabric-focused"  # dcc.Store: GUID of the node focused (after drawing)
FABRIC_PAINT_CONFIG = "fabric-paint-config"  # dcc.Store: colours and scale for fabric.js
FABRIC_SEARCH = "fabric-search"  # dmc.TextInput: host, switch, GUID or job
FABRIC_SEARCH_MESSAGE = "fabric-search-message"  # what the search found not
FABRIC_FILTER = "fabric-filter"  # segmented: all / hot / congested / erroring / down links
FABRIC_SCALE = "fabric-scale"  # segmented: log / quantile colour scale
FABRIC_JOB = "fabric-job"  # dmc.TextInput: a job whose hosts and links to highlight
FABRIC_REPORT_HOSTS = "fabric-report-hosts"  # dmc.TextInput: hosts, comma-separated (none: all)
FABRIC_REPORT_PDF = "fabric-report-pdf"  # link: download the window's report as PDF
FABRIC_REPORT_HTML = "fabric-report-html"  # link: the same as HTML
FABRIC_JOB_MESSAGE = "fabric-job-message"  # what the job highlight shows, or why not
FABRIC_JOB_PLACED = "fabric-job-placed"  # dcc.Store: {"nodes": GUIDs, "links": ids} of the job
FABRIC_TABLE_INTERVAL = "fabric-table-interval"  # dcc.Interval of the tables (slower)

# Job page (frontend/pages/job.py): one job at /jobs/<job>?run=&from=&to=&live=&at=.
JV_LOCATION = "jv-location"  # dcc.Location whose query string holds the view's state
JV_JOB = "jv-job"  # dcc.Store: the job key of the page
JV_STATUS = "jv-status"  # error notice; empty when all is well
JV_TITLE = "jv-title"  # heading: job, run, window
JV_TICK = "jv-tick"  # dcc.Interval: the page's refresh, armed again by each answer
JV_BODY = "jv-body"  # the charts and cards (hidden while the view cannot be shown)
JV_RUN = "jv-run"  # dmc.TextInput: run ordinal (empty: the whole job)
JV_APPLY = "jv-apply"  # button: show the custom window / run
JV_COMPARE = "jv-compare"  # link to the comparison with the previous run of the program
JV_HISTORY_TREND = "jv-history-trend"  # dcc.Graph: elapsed time of the program's last runs
JV_HISTORY = "jv-history"  # table: the runs of the program before the run shown, linked
JV_REPORT_PDF = "jv-report-pdf"  # link: download the report of the shown run and window (PDF)
JV_REPORT_HTML = "jv-report-html"  # link: the same as HTML
JV_SLIDER = "jv-playback"  # dmc.Slider over the window's steps (epoch seconds of a step)
JV_PLAY = "jv-play"  # button: play / pause the playback
JV_PLAYING = "jv-playing"  # dcc.Store: whether the playback runs
JV_RENDERED = "jv-rendered"  # dcc.Store: digest of the data the page shows (skip redraws)
JV_STEP_SHOWN = "jv-step-shown"  # the step the cards show (or "the whole window")
JV_TIMELINE = "jv-timeline"  # dcc.Graph: time and bytes per step by category and I/O layer
JV_HEATMAP = "jv-heatmap"  # dcc.Graph: rank x time share of time inside MPI
JV_OUTLIERS = "jv-outliers"  # html.Ul: the outliers and collective imbalances in words
JV_PLACEMENT = "jv-placement"  # the "Hosts and links" card
JV_PLACEMENT_HOSTS = "jv-placement-hosts"  # dcc.Markdown: the job's hosts on the fabric
JV_PLACEMENT_LINKS = "jv-placement-links"  # dcc.Markdown: their links and load
JV_PLACEMENT_RAILS = "jv-placement-rails"  # dcc.Markdown: multi-rail hosts' rails, job bytes

# Incident banner (frontend/app.py, every page) and the Incidents page (pages/incidents.py).
INCIDENT_BANNER = "incident-banner"  # "N open incidents: <newest's summary>"; empty when none
INCIDENT_BANNER_TICK = "incident-banner-tick"  # dcc.Interval: the banner's refresh
INCIDENT_BANNER_SHOWN = "incident-banner-shown"  # dcc.Store: digest of what the banner shows
INC_UPDATED = "inc-updated"  # time of the last refresh of the list
INC_SEVERITY = "inc-severity"  # dmc.Select: one severity or all
INC_KIND = "inc-kind"  # dmc.Select: one detector kind or all
INC_STATE = "inc-state"  # dmc.SegmentedControl: open / ended / all
INC_JOB = "inc-job"  # dmc.TextInput: one of your jobs
INC_OWNER = "inc-owner"  # dmc.Select: the owner of that job id (several users' jobs share it)
INC_LINK = "inc-link"  # dmc.NumberInput: a fabric link id
INC_WINDOW = "inc-window"  # dcc.Store: the URL's time range (incidents overlapping it)
INC_ERROR = "inc-error"  # the list's error message; empty when all is well
INC_CAPTION = "inc-caption"  # "N incidents" (of how many)
INC_GRID = "inc-grid"  # dash-ag-grid, a row per incident (row id = incident id)
INC_TICK = "inc-tick"  # dcc.Interval: the page's refresh
# One incident's page (pages/incident.py, /incidents/<id>).
INC_ID = "inc-id"  # dcc.Store: the incident's id (from the URL)
INC_PAGE_TICK = "inc-page-tick"  # dcc.Interval: the page's refresh (while it is open)
INC_STATUS = "inc-status"  # what went wrong (an unknown incident, an unreachable server)
INC_TITLE = "inc-title"  # "Incident <id>: <summary>"
INC_FACTS = "inc-facts"  # severity · state · span · jobs hit and time lost · detected
INC_LINKS = "inc-links"  # html.Ul: its links, each a link to the Fabric page at its time
INC_JOBS = "inc-jobs"  # html.Table: its jobs, their ranks and files linked to the job page
INC_EVIDENCE = "inc-evidence"  # dcc.Graph: its links' and jobs' evidence series
INC_REPORT_PDF = "inc-report-pdf"  # link: download the incident's report (PDF)
INC_REPORT_HTML = "inc-report-html"  # link: the same as HTML
CMP_B = "cmp-b"  # dmc.TextInput: the job of run b (the run examined)
CMP_B_RUN = "cmp-b-run"  # dmc.NumberInput: its run ordinal (empty: the newest MPI run)
CMP_A = "cmp-a"  # dmc.TextInput: the job of run a (empty: the median of b's history)
CMP_A_RUN = "cmp-a-run"  # dmc.NumberInput: its run ordinal
CMP_RESULT = "cmp-result"  # html.Div: the comparison's sections, hidden while there is none
CMP_RUNS = "cmp-runs"  # html.Section: the program's runs, hidden while there is no history
CMP_LAST = "cmp-last"  # dmc.NumberInput: runs of the history in the median and the trend
CMP_ERROR = "cmp-error"  # the comparison's error message; empty when all is well
CMP_NOTE = "cmp-note"  # what to name, or why there is nothing to compare yet (not an error)
CMP_FINDING = "cmp-finding"  # the finding in one sentence
CMP_SIDES = "cmp-sides"  # table: the two sides (job, run, elapsed, hosts)
CMP_PARTS = "cmp-parts"  # dcc.Graph: time per part, a beside b
CMP_DIFFS = "cmp-diffs"  # table: the differences, largest first
CMP_SITES_CAPTION = "cmp-sites-caption"  # what the compared call sites grid holds
CMP_SITES = "cmp-sites"  # grid: the call sites of either run, largest change first
CMP_TREND = "cmp-trend"  # dcc.Graph: elapsed time of the program's runs
CMP_HISTORY = "cmp-history"  # table: the program's runs
CMP_OWNERS = "cmp-owners"  # dcc.Store: {"b": owner, "a": owner} from the URL (admins)
CMP_WINDOWS = "cmp-windows"  # dcc.Store: {"b": [from, to], "a": [from, to]} from the URL
CMP_FAMILIES_FIG = "cmp-families-fig"  # dcc.Graph: time per family, a beside b
CMP_FAMILIES = "cmp-families"  # table: the families of either run, largest change first
CMP_CONTEXT = "cmp-context"  # table: each side's placement, link load and incidents
CMP_REPORT_PDF = "cmp-report-pdf"  # link: the comparison's report, PDF
CMP_REPORT_HTML = "cmp-report-html"  # link: the comparison's report, HTML
CMP_EXPORTS = "cmp-exports"  # links: the comparison as JSON and its tables as CSV files
CMP_CLASSES = "cmp-classes"  # table: time per class (traffic category, I/O, computation)
CMP_SIZES_FIG = "cmp-sizes-fig"  # dcc.Graph: messages per op and size bucket, a beside b
CMP_FILES = "cmp-files"  # table: the files of either run, largest change of time first
CMP_LATE = "cmp-late"  # table: each side's late rank
CMP_LATE_MOVED = "cmp-late-moved"  # whether the late rank moved, in words

# The header's time-range control (frontend/timerange.py).
TR_PRESET = "tr-preset"  # dmc.SegmentedControl: live 5 min / 1 h / 24 h, all, custom
TR_FROM = "tr-from"  # dmc.DateTimePicker: the custom range's start (UTC)
TR_TO = "tr-to"  # dmc.DateTimePicker: the custom range's end (UTC; empty: now)
TR_APPLY = "tr-apply"  # dmc.Button: go to the custom range
TR_SHOWN = "tr-shown"  # the range in words, with its zone
NAV_LINK = "nav-link"  # type of the header's page links ({"type": NAV_LINK, "path": ...})
TR_CONFIG = "tr-config"  # dcc.Store: the presets and the pages' defaults

# Overview page (frontend/pages/overview.py).
OV_WINDOW = "ov-window"  # dcc.Store: the URL's time range
OV_TICK = "ov-tick"  # dcc.Interval: the page's refresh
OV_FABRIC = "ov-fabric"  # card: fabric health (links up/down, hottest, errors)
OV_JOBS = "ov-jobs"  # card: running jobs and their share of the links they cross
OV_INCIDENTS = "ov-incidents"  # card: open incidents
OV_HEALTH = "ov-health"  # card: the fabric sampler's and the collector's health
