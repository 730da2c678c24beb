"""schemathesis against /openapi.json (issue #12; issue #24 point 9): generated requests to
every operation, valid and invalid, in every phase (the document's examples, coverage of
each parameter's edges, fuzzing, and stateful sequences over the links schemathesis infers,
e.g. a job id of the job list into the job routes, an incident id of the incident list),
sent to a real server over a real database holding jobs, a fabric and an incident, with
auth on (an ordinary user's API token, also the ingest token, so the gated routes and the
ingest answer past their gates): never a 5xx, and every answer, refusals included, one
the document lists, with the body it describes. The short form (about a minute) runs in
`make test`; the long one (five minutes) is marked slow (`pytest -m slow`). Long runs of
2026-12-06: 35 operations, 32 inferred links, 12,700 to 16,200 cases each (as alice, and
as an admin with other seeds); one found a 500 (`/api/fabric/state?to=0`), since fixed.

Every check runs but `positive_data_acceptance`: a time window's `from`/`to` is a string
the document describes in words (RFC 3339 with an offset, or epoch seconds, within
1970..2262), which JSON Schema cannot state exactly (calendar dates), so a schema-valid
`from=` or `from=2023-02-30T00:00:00Z` is rightly refused with 422 and its reason
(tests/server/test_query_params.py checks those refusals one by one).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine

from collector.service import BackgroundCollector
from server.access.viewer import Access
from server.app import create_app
from server.incidents.service import IncidentService
from stacklens.db import make_engine
from tests.access.data import send_two_users_jobs, token_for
from tests.conftest import serving
from tests.server.incident_data import T0, S, StagedFabric, send
from tests.server.test_incidents import TH

#: schemathesis's command, installed beside this interpreter (a dev dependency).
SCHEMATHESIS = str(Path(sys.executable).parent / "schemathesis")


@pytest.fixture
def seeded(collector, pg_url) -> Iterator[Engine]:
    """The test database with alice's, bob's and carol's jobs of the staged incident (25
    intervals, with its fabric's sweeps and the congestion incident detected), and alice's
    and bob's jobs with every kind of record (tests/access/data.py); its engine."""
    engine = make_engine(pg_url)
    now = [T0]
    detector = IncidentService(engine, TH, sweep_interval_s=1.0, clock=lambda: now[0])
    fabric = StagedFabric(pg_url)
    try:
        for i in range(25):
            fabric.sweep(i)
            send(collector, i)
            now[0] = T0 + (i + 1) * S + 1_600_000_000
            detector.tick()
        send_two_users_jobs(collector)
        yield engine
    finally:
        fabric.close()
        engine.dispose()


def run_schemathesis(
    engine: Engine, pg_url: str, tmp_path: Path, control: Path, examples: int, seconds: int
) -> dict[str, int]:
    """schemathesis with every check, every phase, at most `examples` cases per operation
    and phase and at most `seconds` in all (fuzzing and stateful testing repeat until
    then), as alice with an API token (auth_mode=oidc; the token is the ingest token too,
    trusted mode) against the API and its collector (its control channel at `control`)
    served on a free port. Fails with schemathesis's report; returns its figures
    (`figures`) and the number of operations the document has."""
    token = token_for(engine, "alice")
    events = tmp_path / "events.ndjson"
    with (
        BackgroundCollector(pg_url, token=token, control_socket=control) as running,
        serving(app := create_app(
            engine, collector=running.link, access=Access(mode="oidc", admins=frozenset({"carol"})),
        )) as port,
    ):  # fmt: skip
        result = subprocess.run(
            [SCHEMATHESIS, "run", f"http://127.0.0.1:{port}/openapi.json", "--checks=all",
             "--exclude-checks=positive_data_acceptance", f"--max-examples={examples}",
             f"--max-time={seconds}", "--seed=24", "--no-color", "--workers=1",
             "--generation-database=none", f"--header=Authorization: Bearer {token}",
             f"--report-dir={tmp_path}", "--report=ndjson", f"--report-ndjson-path={events}",
             # a PDF report's first render starts kaleido's Chromium: tens of seconds
             # on a loaded machine (schemathesis's default limits: 10 s)
             "--request-timeout=120", "--max-response-time=120"],
            capture_output=True, text=True, timeout=seconds + 600, cwd=tmp_path,
        )  # fmt: skip
    assert result.returncode == 0, result.stdout[-8000:] + result.stderr[-2000:]
    documented = sum(len(operations) for operations in app.openapi()["paths"].values())
    return {"documented": documented, **figures(events)}


def figures(events: Path) -> dict[str, int]:
    """Operations tested, test cases (one request each), 5xx answers and the links between
    operations the stateful phase followed (inferred from the document) of a run, from
    schemathesis's event log."""
    operations: set[str] = set()
    cases = server_errors = links = 0
    for line in events.read_text().splitlines():
        event = json.loads(line)
        for name, body in event.items():
            if name == "PhaseStarted" and body["phase"]["name"] == "stateful":
                links = max(links, (body.get("payload") or {}).get("transitions_total", 0))
            if name == "ScenarioFinished":
                recorder = body.get("recorder") or {}
                label = recorder.get("label", "")
                if not label.startswith("Stateful"):
                    operations.add(label)
                for interaction in (recorder.get("interactions") or {}).values():
                    cases += 1
                    response = (interaction or {}).get("response") or {}
                    server_errors += int(response.get("status_code", 0) >= 500)
    return {"operations": len(operations), "cases": cases, "5xx": server_errors, "links": links}


def test_api_conforms_to_its_document(seeded, pg_url, tmp_path, control_socket):
    found = run_schemathesis(seeded, pg_url, tmp_path, control_socket, examples=5, seconds=60)
    print("schemathesis:", found)
    assert found["5xx"] == 0 and found["operations"] == found["documented"], found
    assert found["links"] > 0, found  # the stateful phase ran


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_api_conforms_to_its_document_long(seeded, pg_url, tmp_path, control_socket):
    found = run_schemathesis(seeded, pg_url, tmp_path, control_socket, examples=1000,
                             seconds=300)  # fmt: skip
    print("schemathesis:", found)
    assert found["5xx"] == 0 and found["operations"] == found["documented"], found
    assert found["links"] > 0, found  # the stateful phase ran
