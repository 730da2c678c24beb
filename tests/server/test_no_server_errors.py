"""Requests that used to answer 500 (issue #24, finding 8) answer what the document says:
a run ordinal beyond a PostgreSQL integer and a step beyond a year are 422 on every route
taking them (one bound each, in server/query_params.py); every table route writes its
CSV and Parquet files, nested models included; a series whose keys cannot fit at any step
says so (not "ask for a larger step, or leave step out" to a request that left it out)."""

from __future__ import annotations

import io

import pyarrow.parquet as pq

from server.jobs import series
from stacklens import wire
from tests.access.data import ALICE_JOB, send_two_users_jobs
from tests.collector.test_ingest import T0
from tests.server.fabric_data import write_small_fabric
from tests.server.test_jobs_api import job_d_frame, send_committed

#: One past the largest PostgreSQL `integer` (a run's ordinal, a link's id).
TOO_LARGE_INT = 2**31


def _declaring(app, name: str) -> list[str]:
    """The GET paths of the app's OpenAPI document with a query parameter `name`, their
    path parameters filled in (a job: alice's; a link, link group or incident: 1)."""
    paths = []
    for path, operations in app.openapi()["paths"].items():
        query = {p["name"] for p in operations.get("get", {}).get("parameters", [])
                 if p["in"] == "query"}  # fmt: skip
        if name in query:
            paths.append(
                path.replace("{job}", ALICE_JOB).replace("{link}", "1")
                .replace("{incident_id}", "1").replace("{group}", "1")
            )  # fmt: skip
    return paths


def _refused(answer, name: str, rule: str) -> None:
    assert (answer.status_code, answer.json()) == (422, {"detail": [{
        "loc": ["query", name], "msg": f"Input should be {rule}",
        "type": "less_than_equal"}]}), answer.text  # fmt: skip


def test_a_run_beyond_a_database_integer_is_422_on_every_route(collector, api_client):
    send_two_users_jobs(collector)
    paths = _declaring(api_client.app, "run")
    assert len(paths) == 17, paths  # the job routes with runs, the overview, history, report
    for path in paths:
        params = {"job": ALICE_JOB} if path == "/api/compare/history" else {}
        answer = api_client.get(path, params={**params, "run": TOO_LARGE_INT})
        _refused(answer, "run", "less than or equal to 2147483647")
        if path.startswith("/api/jobs/"):  # the largest ordinal is looked up: no such run
            largest = api_client.get(path, params={"run": TOO_LARGE_INT - 1})
            assert (largest.status_code, largest.json()) == (
                404, {"detail": f"job '{ALICE_JOB}' has no run 2147483647"}), path  # fmt: skip
    for side in ("a_run", "b_run"):
        answer = api_client.get("/api/compare", params={"b": ALICE_JOB, side: TOO_LARGE_INT})
        _refused(answer, side, "less than or equal to 2147483647")


def test_a_step_beyond_a_year_is_422_on_every_route(collector, api_client):
    send_two_users_jobs(collector)
    paths = _declaring(api_client.app, "step")
    assert sorted(paths) == [
        "/api/fabric/groups", "/api/fabric/groups/1",
        "/api/fabric/links/1/attribution/series", "/api/fabric/series",
        f"/api/jobs/{ALICE_JOB}/profile", f"/api/jobs/{ALICE_JOB}/series",
    ]  # fmt: skip
    window = {"from": T0 // 10**9, "to": T0 // 10**9 + 2}
    for path in paths:
        for step in ("1e20", "31622401", "inf"):
            link = {"link": 1} if path == "/api/fabric/series" else {}
            answer = api_client.get(path, params={**window, **link, "step": step})
            _refused(answer, "step", "less than or equal to 31622400")
    for path in (f"/api/jobs/{ALICE_JOB}/series", f"/api/jobs/{ALICE_JOB}/profile"):
        year = api_client.get(path, params={"step": 31622400})  # 366 days: one step
        assert year.status_code == 200, year.text
        assert year.json()["step_ns"] == 31622400 * 10**9


def test_sizes_are_written_as_csv_and_parquet(collector, api_client):
    """A size histogram's buckets (a list of models) are one JSON text cell per op."""
    send_committed(collector, [
        job_d_frame(0, 0, hist=[("MPI_Isend", 9, 2), ("MPI_Isend", 8, 1)]),
        job_d_frame(0, 1, hist=[("MPI_Bcast", 10, 1)]),
    ])  # fmt: skip
    url = api_client.app.url_path_for("job_sizes", job="job-D")
    isend = (
        '[{"bucket":8,"lower_bytes":128,"upper_bytes":256,"count":1},'
        '{"bucket":9,"lower_bytes":256,"upper_bytes":512,"count":2}]'
    )
    bcast = '[{"bucket":10,"lower_bytes":512,"upper_bytes":1024,"count":1}]'
    as_csv = api_client.get(url, params={"format": "csv"})
    assert as_csv.status_code == 200
    assert as_csv.headers["content-disposition"] == 'attachment; filename="sizes.csv"'
    assert as_csv.text == "\r\n".join([
        "op,category,messages,buckets",
        "MPI_Isend,mpi_p2p,3," + '"' + isend.replace('"', '""') + '"',
        "MPI_Bcast,mpi_coll,1," + '"' + bcast.replace('"', '""') + '"',
        "",
    ])  # fmt: skip
    as_parquet = api_client.get(url, params={"format": "parquet"})
    assert as_parquet.status_code == 200
    assert pq.read_table(io.BytesIO(as_parquet.content)).to_pylist() == [
        {"op": "MPI_Isend", "category": "mpi_p2p", "messages": 3, "buckets": isend},
        {"op": "MPI_Bcast", "category": "mpi_coll", "messages": 1, "buckets": bcast},
    ]


def test_every_table_route_writes_its_files(collector, api_client):
    """Every route taking `format` answers csv and parquet for a job with every record."""
    send_two_users_jobs(collector)
    paths = [p for p in _declaring(api_client.app, "format") if p.startswith("/api/jobs/")]
    assert len(paths) == 11, paths
    for path in paths:
        for fmt, media in (("csv", "text/csv; charset=utf-8"),
                           ("parquet", "application/vnd.apache.parquet")):  # fmt: skip
            answer = api_client.get(path, params={"format": fmt})
            assert (answer.status_code, answer.headers["content-type"]) == (200, media), path


def test_a_series_with_more_keys_than_points_says_no_step_fits(collector, api_client):
    """16,385 files in one interval: no step keeps them within MAX_POINTS points, with
    the step chosen or given; the refusal says so and does not offer a step."""
    files = series.MAX_POINTS + 1
    records = wire.records("io", [
        {"layer": 1, "writes": 1, "bytes_written": 1, "path": f"/scratch/f{i}".encode(),
         "mount": b"/scratch", "fstype": b"ext4"} for i in range(files)
    ])  # fmt: skip
    send_committed(collector, [wire.encode_frame(
        job_id="many-files", world_rank=0, world_size=1, seq=0, token="secret",
        interval_start_ns=T0, interval_end_ns=T0 + 10**9, tables={"io": records},
    )])  # fmt: skip
    url = api_client.app.url_path_for("job_series", job="many-files")
    detail = (
        "by=file has 16,385 keys with values in the window, more than the 16,384 "
        "points an answer holds at any step: ask for a shorter window or one run"
    )
    for params in ({"by": "file"}, {"by": "file", "step": 1}, {"by": "file", "step": 60}):
        answer = api_client.get(url, params=params)
        assert (answer.status_code, answer.json()) == (422, {"detail": detail}), params


def test_a_fabric_window_ending_at_the_epoch_is_422(pg_url, api_client):
    """`to=0` alone: the default start (15 minutes before `to`) is held at the epoch, so the
    window is empty; every fabric route with a window says so (the state read an empty
    window's sums and failed)."""
    write_small_fabric(pg_url)
    for path, params in [("/api/fabric/state", {}), ("/api/fabric/topology", {}),
                         ("/api/fabric/links", {}), ("/api/fabric/events", {}),
                         ("/api/fabric/series", {"link": 1})]:  # fmt: skip
        answer = api_client.get(path, params={**params, "to": 0})
        assert (answer.status_code, answer.json()) == (
            422, {"detail": "the window is empty or inverted: to <= from"}), path  # fmt: skip
        assert api_client.get(path, params={**params, "to": 1}).status_code == 200, path


def test_a_job_of_more_ranks_than_points_takes_the_step_its_refusal_offers(collector, api_client):
    """A world of 16,385 ranks (one reporting): by rank, by peer and the profile refuse a
    step finer than one over the window and name that step; asked for it, they answer
    (the refusal named a step that was then refused in turn)."""
    ranks = series.MAX_POINTS + 1
    send_committed(collector, [wire.encode_frame(
        job_id="wide", world_rank=0, world_size=ranks, seq=0, token="secret",
        interval_start_ns=T0, interval_end_ns=T0 + 10**9,
        tables={"p2p": wire.records("p2p", [{"peer": 1, "bytes_sent": 8, "msgs_sent": 1}])},
    )])  # fmt: skip
    for by in ("rank", "peer"):
        url = api_client.app.url_path_for("job_series", job="wide")
        fine = api_client.get(url, params={"by": by, "step": 1})
        assert (fine.status_code, fine.json()) == (422, {"detail": (
            f"by={by} at step=1 s over 1 s is 32,770 points (16,385 keys x 2 steps), more "
            "than 16,384: ask for step >= 2 s or a shorter window, or leave step out (chosen "
            "to fit)")}), by  # fmt: skip
        offered = api_client.get(url, params={"by": by, "step": 2})
        assert offered.status_code == 200, offered.text
        assert [p["key"] for p in offered.json()["points"]] == ["0" if by == "rank" else "1"]
    url = api_client.app.url_path_for("job_profile", job="wide")
    fine = api_client.get(url, params={"step": 1})
    assert (fine.status_code, fine.json()) == (422, {"detail": (
        "step=1 s over 1 s is 32,770 rank x step cells (16,385 ranks), more than 16,384: ask "
        "for step >= 2 s or a shorter window, or leave step out")})  # fmt: skip
    offered = api_client.get(url, params={"step": 2})
    assert (offered.status_code, offered.json()["step_ns"]) == (200, 2 * 10**9), offered.text
