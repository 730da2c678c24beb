"""The Jobs page's pure pieces: a job's page path, the refresh period's back-off
(frontend/refresh.py), the start-time inputs and the job list's page line (the browser runs them in
tests/e2e/test_jobs_page.py)."""

from __future__ import annotations

from urllib.parse import unquote

import pytest

from frontend import components
from frontend.refresh import next_period
from presentation.formatting import parse_utc_ns
from stacklens.api_models import JobList, PageInfo


def test_a_job_path_is_one_segment_read_back_as_the_job():
    for job in ("job-1", "run/7", "a b%c?d#e", "ü/ß"):
        path = components.job_path(job)
        assert path.startswith("/jobs/") and "/" not in path[len("/jobs/") :]
        assert "?" not in path and "#" not in path
        assert unquote(path[len("/jobs/") :]) == job


@pytest.mark.parametrize(
    ("took_ms", "failed", "period_ms", "expected"),
    [
        (40, False, 500, 500),  # fast: the configured period
        (900, False, 500, 1800),  # slow: twice what the refresh took
        (40, True, 500, 1000),  # failed: double the period
        (40, True, 1000, 2000),
        (40, True, 20_000, 30_000),  # never above the maximum
        (60_000, False, 500, 30_000),
    ],
)
def test_the_refresh_period_backs_off(took_ms, failed, period_ms, expected):
    assert next_period(500, period_ms, took_ms, failed) == expected


def test_start_times_are_read_as_utc():
    assert parse_utc_ns("1970-01-01 00:01") == 60 * 10**9
    assert parse_utc_ns("1970-01-02") == 86_400 * 10**9
    assert parse_utc_ns(" 1970-01-01 00:00:07 UTC ") == 7 * 10**9
    assert parse_utc_ns("yesterday") is None and parse_utc_ns("") is None
    assert parse_utc_ns(None) is None


def test_the_page_info_counts_from_the_pages_first_job():
    def page(n: int, total: int) -> JobList:
        summary = {"job": "j", "world_size": 1, "command": "", "user": "", "status": "running",
                   "started_ns": 0, "last_seen_ns": 0, "ranks_seen": 1, "bytes_sent": 0,
                   "messages_sent": 0, "runs": []}  # fmt: skip
        info = PageInfo(total=total, limit=100, next_cursor=None)
        return JobList(jobs=[summary] * n, page=info)

    assert components.job_page_info(page(100, 20_000), 101) == (
        "jobs 101–200 of 20,000, newest first"
    )
    assert components.job_page_info(page(0, 0), 1) == "no jobs"
    assert components.job_page_info(page(0, 5), 1) == "no job matches"
