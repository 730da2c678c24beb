# frontend/urls.py — the pages' own URLs: the one place that writes and reads them.
"""URLs of the dashboard's views: `/jobs/<job>` shows one job on the Jobs page (the job id
quoted: ids may hold slashes). `job_view` is the one reader of a Jobs page URL; what else
the URL may say (a run, a time window) is added to `JobView` and read there."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote, unquote


@dataclass(frozen=True)
class JobView:
    """What a Jobs page URL asks for: `job` (None: the first job of the list)."""

    job: str | None = None


def job_view(job: str | None = None, **_query: str) -> JobView:
    """What a Jobs page URL asks for: `/` or `/jobs/<job>` (the id quoted as `job_url`
    writes it). Dash passes the path variable `job` and the query parameters by name."""
    return JobView(job=unquote(job) if job else None)


def job_url(job: str) -> str:
    """The URL of a job's own view."""
    return f"/jobs/{quote(job, safe='')}"
