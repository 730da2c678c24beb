"""The incidents' pure frontend parts (frontend/components.py, presentation/figures.py): the
grid rows, the banner (only while incidents are open), the jobs table with another user's
job as "another job", and the evidence figure's traces."""

from __future__ import annotations

from dash import html

from frontend import components
from presentation import figures
from stacklens.api_models import IncidentDetails, IncidentList

T0 = 1_800_000_000 * 10**9
SUMMARY = "Congestion on spine01[5] – leaf02[9]; likely aggressor: another job; victim: job a|b"


def _summary(**extra: object) -> dict:
    return {"id": 3, "kind": "congestion", "severity": "major", "title": "Congestion on "
            "spine01[5] – leaf02[9]", "summary": SUMMARY, "open": True, "start_ns": T0,
            "end_ns": None, "detected_ns": T0 + 2 * 10**9, "updated_ns": T0, "unobserved_ns": None,
            "lost_ns": 6 * 10**9, "hit": 1, "signals": ["congestion", "mpi_slowdown"],
            "link_ids": [39], "jobs": 2, **extra}  # fmt: skip


def _list(*rows: dict) -> IncidentList:
    return IncidentList.model_validate(
        {"incidents": list(rows), "page": {"total": len(rows), "limit": 1, "next_cursor": None}}
    )


def test_rows_and_banner():
    listed = _list(_summary(), _summary(id=2, open=False, end_ns=T0 + 9 * 10**9, jobs=0))
    assert components.incident_rows(listed) == [
        {"id": 3, "severity": "major", "kind": "congestion", "summary": SUMMARY,
         "state": "open", "start": "2027-01-15 08:00:00 UTC", "end": "", "jobs": 2},
        {"id": 2, "severity": "major", "kind": "congestion", "summary": SUMMARY,
         "state": "ended", "start": "2027-01-15 08:00:00 UTC",
         "end": "2027-01-15 08:00:09 UTC", "jobs": 0},
    ]  # fmt: skip
    (banner,) = components.incident_banner(_list(_summary()))
    assert isinstance(banner, html.Div) and banner.role == "alert"
    assert banner.className == "notice notice-error incident-banner severity-major"
    assert banner.children[0].children == "1 open incident"
    assert banner.children[1] == f" — major: {SUMMARY} "
    assert banner.children[2].href == "/incidents"
    assert components.incident_banner(_list()) == []


def _details() -> IncidentDetails:
    end = {"guid": "0x0000000000000001", "port": 5, "name": "spine01"}
    member = {"role": "victim", "visible": True, "job": "a|b", "user": "alice",
              "label": "job a|b", "signals": ["mpi_slowdown"], "ranks": [1, 0],
              "files": ["MPI-IO:/x_y.h5"], "link_bytes": 3 << 20,
              "evidence": {"mpi_slowdown": {"baseline_per_byte_ns": 2.0, "series": [
                  {"t_ns": T0, "per_byte_ns": 2.0}, {"t_ns": T0 + 10**9, "per_byte_ns": 10.0},
                  {"t_ns": T0 + 2 * 10**9, "per_byte_ns": None}]}}}  # fmt: skip
    hidden = {"role": "aggressor", "visible": False, "job": None, "user": None,
              "label": "another job", "signals": [], "ranks": [], "files": [],
              "link_bytes": None, "evidence": {}}  # fmt: skip
    link = {"id": 39, "a": end, "b": {**end, "name": "leaf02", "port": 9},
            "capacity_bytes_per_s": 4, "signals": ["congestion"], "peak": 5.0,
            "evidence": [{"t_ns": T0, "utilisation": 0.1, "xmit_wait_per_s": 5e6}]}  # fmt: skip
    return IncidentDetails.model_validate({**_summary(), "links": [link],
                                           "members": [hidden, member]})  # fmt: skip


def test_jobs_table_shows_another_job_and_escapes_text():
    assert components.incident_jobs_markdown(_details()).splitlines() == [
        "| Role | Job | User | Signals | Bytes on the links | Ranks | Files |",
        "|---|---|---|---|---:|---|---|",
        "| aggressor | another job |  |  |  |  |  |",
        "| victim | a&#124;b | alice | mpi_slowdown | 3.00 MiB | 1, 0 | MPI-IO&#58;/x&#95;y.h5 |",
    ]


def test_evidence_figure():
    fig = figures.incident_evidence(_details())
    traces = [(t.name, list(t.y)) for t in fig.data]
    assert traces == [
        ("spine01[5] – leaf02[9] utilisation", [0.1]),
        ("spine01[5] – leaf02[9] xmit-wait/s", [5e6]),
        ("job a|b mpi_slowdown", [1.0, 5.0]),  # over the baseline; the unknown step left out
    ]
