# frontend/pages/incident.py — the "/incidents/<id>" page: one incident, with everything it
# names linked to where it can be followed (the job page, the fabric page, the reports).
"""Incident page: one incident (`/incidents/<id>`, the URL the alert webhook sends), as
GET /api/incidents/{id} shows it to the viewer: its title and summary, its severity, state
(open, ended, or ended unobserved since a time), span, the jobs it hit and the time they
lost; its links, each a link to the Fabric page over the incident's window replaying the
sweep it began in and centred on the link (its detail panel open); its jobs with their
roles, signals, time lost, bytes on the links, ranks and files, the job, ranks and files
linking to the job's page over the incident's window and to the job's report over it
(another user's job is "another job", with nothing to follow); the incident's report
(PDF, HTML); its evidence series. Refreshes every few seconds while it is open."""

from __future__ import annotations

from typing import Any

import dash
from dash import Input, Output, dcc, html

from frontend import api, components, ids
from frontend.api import ApiError
from presentation import figures
from presentation.components import chart

dash.register_page(__name__, path_template="/incidents/<incident_id>", name="Incident",
                   title="Incident — stacklens")  # fmt: skip

#: The page's refresh period while the incident is open (ms).
REFRESH_MS = 3000


def layout(incident_id: str = "", **_query: str) -> html.Div:
    """The page's skeleton for this incident; `render` fills it."""
    return html.Div(
        className="page",
        children=[
            dcc.Store(id=ids.INC_ID, data=incident_id),
            dcc.Interval(id=ids.INC_PAGE_TICK, interval=REFRESH_MS),
            html.Div(id=ids.INC_STATUS, role="status"),
            html.Section(className="card", children=[
                html.H2(id=ids.INC_TITLE),
                html.P(id=ids.INC_FACTS, className="summary"),
                html.Div(className="controls", children=[
                    components.report_buttons(ids.INC_REPORT_PDF, ids.INC_REPORT_HTML),
                    dcc.Link("all incidents", href="/incidents"),
                ]),
            ]),
            html.Section(className="card", children=[
                html.H3("Links"), html.Ul(id=ids.INC_LINKS),
            ]),
            html.Section(className="card", children=[
                html.H3("Jobs"), html.Div(id=ids.INC_JOBS),
            ]),
            html.Section(className="card", children=[
                html.H3("Evidence"),
                chart(ids.INC_EVIDENCE),
            ]),
        ],
    )  # fmt: skip


#: The evidence chart when the incident could not be read (its status line says why).
_NO_EVIDENCE = figures.message_figure("No evidence: the incident could not be read.")


def incident_number(text: str) -> int | None:
    """The incident id a URL's path part names (None: not an id)."""
    return int(text) if text.isdigit() and 0 < int(text) < 2**63 else None


def register_callbacks(dash_app: dash.Dash) -> None:
    """Attach this page's callbacks to `dash_app`."""

    @dash_app.callback(
        Output(ids.INC_STATUS, "children"),
        Output(ids.INC_TITLE, "children"),
        Output(ids.INC_FACTS, "children"),
        Output(ids.INC_LINKS, "children"),
        Output(ids.INC_JOBS, "children"),
        Output(ids.INC_EVIDENCE, "figure"),
        Output(ids.INC_REPORT_PDF, "href"),
        Output(ids.INC_REPORT_HTML, "href"),
        Output(ids.INC_PAGE_TICK, "disabled"),
        Input(ids.INC_ID, "data"),
        Input(ids.INC_PAGE_TICK, "n_intervals"),
    )
    def render(incident_id: str, _tick: int | None) -> tuple[Any, ...]:
        number = incident_number(incident_id or "")
        if number is None:
            return (f"no incident '{incident_id}'", *[dash.no_update] * 4, _NO_EVIDENCE,
                    *[dash.no_update] * 2, True)  # fmt: skip
        try:
            incident = api.current_client().incident(number)
        except ApiError as exc:  # unknown, or the server unreachable: said, the rest kept
            unknown = exc.status == 404
            return (str(exc), *[dash.no_update] * 4, _NO_EVIDENCE if unknown else dash.no_update,
                    *[dash.no_update] * 2, unknown)  # fmt: skip
        path = f"incidents/{number}"
        return (
            "",
            f"Incident {incident.id}: {incident.summary}",
            components.incident_facts(incident),
            components.incident_links(incident),
            components.incident_jobs(incident),
            figures.incident_evidence(incident),
            components.report_href(path, {}, "pdf"),
            components.report_href(path, {}, "html"),
            not incident.open,
        )
