"""A real MPI-IO (and POSIX) victim (issue #31 point 2): io_victim.c on 2 ranks writes a
1 MiB block per rank every 100 ms, first to a file on a fast file system, then to one on a
slow one: tests/incidents/slowfs.c, preloaded after the hooks, makes every write under
that directory block 50 ms longer, inside the program's pwrite or inside the write the
MPI-IO layer (Open MPI's OMPIO, MPICH's ROMIO) makes under MPI_File_write_at. The incident
service, over what the collector stored, opens an I/O stall of that job 2 steps after its
first slow step began, the job its victim, its time by op class (MPI-IO writes, or POSIX
writes) exactly the stored I/O records' of each step, at least 50 ms per slowed write,
its file the slow one and its call site whose time rose the write's line in io_victim.c,
on the API, the incident's page data and the webhook's JSON alike."""

from __future__ import annotations

import uuid
from collections import defaultdict
from pathlib import Path

import pytest
from sqlalchemy import func, select, text
from sqlalchemy.orm import Session

from server.incidents.detect import Thresholds
from server.incidents.repository import IO_WAITING, io_class
from stacklens.db import make_engine
from stacklens.paths import LIBRARIES
from stacklens.schema import IoDelta
from tests.hooks import jobs
from tests.incidents.programs import build, line_of, slowfs, tick_incident

S = 10**9
NORMAL_S, SLOW_S = 8, 6
DELAY_US = 50_000
TH = Thresholds(sweeps=2, clear=3, slowdown=3.0, baseline_ns=120 * S, min_time_ns=10**6,
                min_ns=2 * S)  # fmt: skip
#: The layer code of each mode's writes (stacklens.constants.IO_LAYERS) and its site's op.
MODES = {"mpiio": (3, "MPI_File_write_at"), "posix": (1, "pwrite")}


@pytest.mark.parametrize(("mpi", "mode"), [("openmpi", "mpiio"), ("mpich", "mpiio"),
                                           ("openmpi", "posix")])  # fmt: skip
def test_writes_to_a_slow_file_system_make_the_job_an_io_victim_at_its_line(
    tmp_path: Path, collector, pg_url, api_client, mpi: str, mode: str
) -> None:
    layer, op = MODES[mode]
    program, library = build("io_victim.c", mpi, tmp_path), slowfs(tmp_path)
    data, report = tmp_path / "data", tmp_path / "report"
    for d in (data / "fast", data / "slow", report):
        d.mkdir(parents=True)
    job = f"iov-{uuid.uuid4().hex[:8]}"
    done = jobs.run_job(collector, mpi, [str(program), str(data), mode, str(NORMAL_S),
                                         str(SLOW_S)], job, ranks=2, timeout=120,
                        LD_PRELOAD=f"{LIBRARIES[mpi]}:{library}",
                        SLOWFS_DIR=str(data / "slow"), SLOWFS_DELAY_US=str(DELAY_US),
                        SLOWFS_REPORT=str(report))  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    # what the program did and what the slow file system delayed (a report per process that
    # loaded it, the launcher's too): every write to it, once
    said = [tuple(int(n) for n in line.split()[1:]) for line in done.stdout.splitlines()
            if line.startswith("writes ")]  # fmt: skip
    delayed = [tuple(int(n) for n in f.read_text().split()) for f in report.iterdir()]
    slow_writes = sum(slow for _, slow in said)
    assert len(said) == 2 and {d[1] for d in delayed} == {DELAY_US}
    assert sum(d[0] for d in delayed) == slow_writes
    slow_from = int((data / "slow_from").read_text())

    ticked = tick_incident(pg_url, job, TH)
    incident, messages = ticked.incident, ticked.messages
    job_id = ticked.job_id
    engine = make_engine(pg_url)
    try:
        with Session(engine) as session:
            i = IoDelta
            stored = session.execute(
                select(i.path, func.sum(i.writes), func.sum(i.write_time_ns))
                .where(i.job_id == job_id, i.layer == layer, i.phase == 0)
                .group_by(i.path)
            ).all()  # fmt: skip
            # per step (by its end), the time by op class and the writes to the slow file
            per_step: dict[int, dict[str, int]] = defaultdict(dict)
            slow_per_step: dict[int, int] = defaultdict(int)
            writes_per_step: dict[int, int] = defaultdict(int)
            query = select(func.floor(i.t_end_ns / S), i.layer, i.path, func.sum(i.writes),
                           func.sum(i.read_time_ns), func.sum(i.write_time_ns)).where(
                i.job_id == job_id, i.phase == 0).group_by(text("1"), i.layer, i.path)  # fmt: skip
            for second, lay, path, writes, read_ns, write_ns in session.execute(query):
                step = (int(second) + 1) * S
                for direction, ns in (("read", read_ns), ("write", write_ns)):
                    if ns:
                        name = io_class(lay, direction)
                        per_step[step][name] = per_step[step].get(name, 0) + int(ns)
                if lay == layer and path == str(data / "slow" / "data"):
                    slow_per_step[step] += int(writes)
                if lay == layer:
                    writes_per_step[step] += int(writes)
    finally:
        engine.dispose()

    # the stored writes: every one of the slow file's delayed, so at least DELAY_US each
    by_path = {path: (int(n), int(ns)) for path, n, ns in stored}
    slow_path = str(data / "slow" / "data")
    assert by_path[slow_path][0] == slow_writes
    assert by_path[slow_path][1] >= slow_writes * DELAY_US * 1000

    assert [m["event"] for m in messages] in (["opened"], ["closed"])
    assert incident.kind == "io_stall" and incident.link_ids == []
    assert slow_from - S < incident.start_ns < slow_from + SLOW_S * S
    assert incident.detected_ns - incident.start_ns == 2 * S  # 2 steps

    answer = api_client.get(f"/api/incidents/{incident.id}").json()
    (member,) = answer["members"]
    assert (member["job"], member["role"], member["signals"]) == (job, "victim", ["io_stall"])
    layer_name = {3: "MPI-IO", 1: "POSIX"}[layer]
    assert member["files"][0] == f"{layer_name}:{slow_path}"
    evidence = member["evidence"]["io_stall"]
    # each step's time by op class is exactly that of the stored I/O records of the step
    for point in evidence["series"]:
        assert point.get("waiting_ns", {}) == per_step.get(point["t_ns"], {}), point
    # the steps its signal held
    held = [p for p in evidence["series"] if incident.start_ns < p["t_ns"] <= ticked.last_ns]
    wanted = io_class(layer, "write")
    assert wanted in IO_WAITING and evidence["waits_in"] == wanted
    summed: dict[str, int] = defaultdict(int)
    for point in held:
        for kind, ns in point.get("waiting_ns", {}).items():
            summed[kind] += ns
    assert evidence["waiting_ns"] == dict(summed)
    # the held steps' writes are slowed ones (50 ms each at least), nearly all their time
    slowed = sum(slow_per_step[p["t_ns"]] for p in held)
    assert slowed > 0 and evidence["waiting_ns"][wanted] >= slowed * DELAY_US * 1000
    assert evidence["waiting_ns"][wanted] >= 0.95 * sum(evidence["waiting_ns"].values())
    # the call site whose time rose: the write's line, linked to the job's call sites
    line = line_of("io_victim.c", f"write-{mode}")
    sites = [(s["label"], s["op"], s["layer"], s["signal"]) for s in member["callsites"]]
    assert sites == [(f"io_victim.c:{line}", op, "mpi" if mode == "mpiio" else "posix",
                      "io_stall")]  # fmt: skip
    site = member["callsites"][0]
    # over the held steps: its calls every write of the layer, its time the slowed ones' at least
    assert site["calls"] == sum(writes_per_step[p["t_ns"]] for p in held)
    assert site["time_ns"] >= slowed * DELAY_US * 1000
    shown = api_client.get(f"/api/jobs/{job}/callsites").json()["sites"]
    assert site["key"] in {s["key"] for s in shown}
    # the webhook's JSON: the site in its line and in its job, with the call sites' URL
    (sent,) = messages
    assert f"victim: job {job} at io_victim.c:{line} ({op})" in sent["text"]
    (sent_job,) = sent["incident"]["jobs"]
    assert [s["label"] for s in sent_job["callsites"]] == [f"io_victim.c:{line}"]
    assert sent_job["callsites_url"].startswith(f"http://sl.example/jobs/{job}?")
    assert sent_job["callsites_url"].endswith("#card-callsites")
