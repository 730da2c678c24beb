"""schemathesis against /openapi.json: generated requests to every route, valid and
invalid, sent to the served application, must never get a 5xx, and every answer must be
one the document lists, with the body it describes (issue #12). The short form runs in
`make test`; the long one is marked slow.

Every check runs but `positive_data_acceptance`: a time window's `from`/`to` is a string
the document describes in words (RFC 3339 with an offset, or epoch seconds, within
1970..2262), which JSON Schema cannot state exactly (calendar dates), so a schema-valid
`from=` or `from=2023-02-30T00:00:00Z` is rightly refused with 422 and its reason
(tests/server/test_query_params.py checks those refusals one by one).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from collector.service import CollectorService
from server.app import create_app
from stacklens.db import make_engine
from stacklens.settings import Settings
from tests.conftest import serving

#: schemathesis's command, installed beside this interpreter (a dev dependency).
SCHEMATHESIS = str(Path(sys.executable).parent / "schemathesis")


def run_schemathesis(pg_url: str, examples: int, tmp_path: Path) -> None:
    """Every check of schemathesis, `examples` cases per operation, against the API (its
    collector not started: without the token, the ingest route answers before it would be
    needed) served on a free port; fail with schemathesis's report."""
    engine = make_engine(pg_url)
    service = CollectorService(
        pg_url, Settings(collector="127.0.0.1:0", ingest_token="secret", ingest_auth="trusted")
    )
    app = create_app(engine, api_base_url="http://x", collector=service, with_frontend=False)
    try:
        with serving(app) as port:
            result = subprocess.run(
                [SCHEMATHESIS, "run", f"http://127.0.0.1:{port}/openapi.json", "--checks=all",
                 "--exclude-checks=positive_data_acceptance",
                 f"--max-examples={examples}", "--seed=12", "--no-color",
                 "--generation-database=none", f"--report-dir={tmp_path}",
                 # a PDF report's first render starts kaleido's Chromium: tens of seconds
                 # on a loaded machine (schemathesis's default limits: 10 s)
                 "--request-timeout=120", "--max-response-time=120"],
                capture_output=True, text=True, timeout=1800, cwd=tmp_path,
            )  # fmt: skip
    finally:
        engine.dispose()
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]


def test_api_conforms_to_its_document(pg_url, tmp_path):
    run_schemathesis(pg_url, 20, tmp_path)


@pytest.mark.slow
def test_api_conforms_to_its_document_long(pg_url, tmp_path):
    run_schemathesis(pg_url, 500, tmp_path)
