# tests/compare/test_sizes_truth.py — a larger message size, compared (issue #28 point 5).
"""phases.c run twice under the hooks with the same command line, differing only in the
message size of the MPI_Allreduce on its pair communicator (PHASES_COUNT: 1 double in run
a, SIZED_COUNT doubles in run b). The comparison names that line first among the call
sites, its family ("split at phases.c:<line>, 1 group of 2") first among the communicator
families with the exact bytes of both runs, MPI_Allreduce first among the parts and in the
finding; each side's call sites and families are exactly those of its own run's pages
(GET /api/jobs/{job}/callsites and /families); each side's fabric context says, with no
fabric known, one host, not placed, no link, no figure invented (issue #28 points 2, 5).
The report holds the families table and the labelled figures (issue #28 point 4)."""

from __future__ import annotations

import html
import re
import subprocess
import uuid
from pathlib import Path

import pytest

from tests.compare.test_sites_truth import COMPILERS, HERE, ITERATIONS, RANKS, line_of, run

#: Doubles per rank in run b's sized MPI_Allreduce (8 MiB); run a sends 1.
SIZED_COUNT = 1 << 20


def sized_runs(collector, mpi: str, folder: Path) -> tuple[str, str]:
    """phases.c built for `mpi` and run twice, the same command line: (job a, job b)."""
    program = folder / "phases"
    subprocess.run([COMPILERS[mpi], "-g", "-O2", "-o", program, HERE / "phases.c"],
                   check=True)  # fmt: skip
    job_a, job_b = f"sized-a-{uuid.uuid4().hex[:8]}", f"sized-b-{uuid.uuid4().hex[:8]}"
    run(collector, mpi, program, job_a, PHASES_COUNT="1")
    run(collector, mpi, program, job_b, PHASES_COUNT=str(SIZED_COUNT))
    return job_a, job_b


@pytest.mark.parametrize("mpi", ["openmpi", "mpich"])
def test_the_larger_message_is_named_first(collector, api_client, tmp_path, mpi: str) -> None:
    job_a, job_b = sized_runs(collector, mpi, tmp_path)
    answer = api_client.get("/api/compare", params={"a": job_a, "b": job_b})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    sized = f"phases.c:{line_of('sized')}"
    calls = ITERATIONS * RANKS
    first = body["sites"][0]
    assert (first["label"], first["op"], first["present"]) == (sized, "MPI_Allreduce", "both")
    assert (first["a_calls"], first["b_calls"]) == (calls, calls)
    assert (first["a_bytes"], first["b_bytes"]) == (calls * 8, calls * 8 * SIZED_COUNT)
    assert first["delta_ns"] > 0
    # the pair family first, with the exact bytes of both runs
    family = f"split at phases.c:{line_of('split')}, 1 group of 2"
    top = body["families"][0]
    assert (top["label"], top["present"]) == (family, "both")
    assert (top["a_calls"], top["b_calls"]) == (calls, calls)
    assert (top["a_bytes"], top["b_bytes"]) == (calls * 8, calls * 8 * SIZED_COUNT)
    assert top["delta_ns"] == top["b_ns"] - top["a_ns"] > 0
    assert [f["label"] for f in body["families"]] == [family, "world"]
    # the parts: MPI_Allreduce changed most, and the finding says so first
    assert body["differences"][0]["name"] == "MPI_Allreduce"
    assert body["finding"].split(": ", 1)[1].startswith("MPI_Allreduce +")
    # each side's figures are its own run's pages', exactly
    for side, job in (("a", job_a), ("b", job_b)):
        own = api_client.get(f"/api/jobs/{job}/families").json()["families"]
        shown = {f["label"]: (f[f"{side}_ns"], f[f"{side}_calls"], f[f"{side}_bytes"])
                 for f in body["families"] if f["present"] in ("both", side)}  # fmt: skip
        assert shown == {
            f["label"]: (f["time_ns"], sum(o["calls"] for o in f["ops"]), f["bytes"]) for f in own
        }, side
        sites = api_client.get(f"/api/jobs/{job}/callsites").json()["sites"]
        shown_sites = {(s["label"], s["op"]): (s[f"{side}_ns"], s[f"{side}_calls"],
                                               s[f"{side}_bytes"])
                       for s in body["sites"] if s["present"] in ("both", side)}  # fmt: skip
        assert shown_sites == {(s["label"], s["op"]): (s["time_ns"], s["calls"], s["bytes"])
                               for s in sites}, side  # fmt: skip
        context = body[side]["context"]
        placement = api_client.get(f"/api/jobs/{job}/placement").json()
        assert context["hosts"] == len(placement["hosts"]) == 1
        assert {k: context[k] for k in ("placed_hosts", "leaves", "links", "crossed_links",
                                        "link_bytes", "xmit_wait", "used_links", "own_bytes",
                                        "other_job_bytes", "other_jobs", "incidents")} == {
            "placed_hosts": 0, "leaves": [], "links": 0, "crossed_links": 0,
            "link_bytes": None, "xmit_wait": None, "used_links": 0, "own_bytes": 0.0,
            "other_job_bytes": 0.0, "other_jobs": 0, "incidents": [],
        }  # fmt: skip
    # the report: its families section (table and labelled figure) names the family first
    report = api_client.get("/api/reports/compare", params={"a": job_a, "b": job_b})
    assert report.status_code == 200, report.text
    text = html.unescape(report.text)
    assert f"Largest change in a communicator family: {family} +" in text
    section = text[text.index('id="families"') :]
    first_row = re.search(r"<tbody>\s*<tr>(.*?)</tr>", section, re.S)
    assert first_row is not None
    cells = [c.strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", first_row.group(1), re.S)]
    assert cells[:2] == [family, "both"]
    assert cells[8:10] == [f"{calls * 8:,}", f"{calls * 8 * SIZED_COUNT:,}"]
    for title in ("Time per communicator family (summed over the ranks)",
                  "Time per call site (summed over the ranks), largest change first",
                  "Where the elapsed time went (per rank)"):  # fmt: skip
        assert title in text
