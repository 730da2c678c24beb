# tests/callsites/test_resolution.py — call sites resolved in the background, stored, read.
"""collector/resolver.py and server/callsites/resolution.py over the call-site test
programs (tests/symbols) sent through the real collector into the real database: the
collector's resolver names each frame once, as it arrives (a module read once whatever
the number of sites), the answers survive the files' removal and a rebuild; before the
resolver has answered, the API labels a site not resolved yet (never a guessed line); a
binary rebuilt before any answer gives the fallback with its reason, stored, never a
line; a node's answer labels its owner's jobs only and comes before the collector's; a
file claiming another user's build-id at a path of its own labels only its own path's
frames (issue #26: the collector's answers are keyed by the path they were read at); a
job's frames are read from a file only when the job's owner (a test user here) may read
it, the reason the same whether it exists or not, and a fallback is shown to the owner it
was found for only."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from sqlalchemy.orm import Session

from collector.resolver import SiteResolver
from collector.service import BackgroundCollector
from server.callsites import resolution
from stacklens import wire
from stacklens.db import make_engine
from stacklens.symbols import NOT_READABLE, file_build_id
from tests.callsites.test_route import JOB, frame, path, site
from tests.collector.test_ingest import T0
from tests.conftest import query
from tests.e2e.test_jobs_page import seed
from tests.identity.daemons import unix_user
from tests.symbols.programs import HERE, build, run


def sites_job(collector, program: Path) -> list[tuple[int, str, int, int, int]]:
    """Rank 0 of JOB calls MPI_Allreduce from each recorded line of the program: one site
    per recorded call (5: two modules)."""
    rows = run(program)
    sites = [site(i, "MPI_Allreduce", 4, 1, 8, 1_000) for i in range(len(rows))]
    paths = [path(i, module, offset) for i, (_, module, offset, _, _) in enumerate(rows)]
    seed(collector, [frame(0, 0, sites, paths)])
    return rows


def labels(api_client) -> list[tuple[str, str, str]]:
    answer = api_client.get(f"/api/jobs/{JOB}/callsites").json()
    return sorted((s["label"], s["frames"][0]["resolved"], s["frames"][0]["reason"])
                  for s in answer["sites"])  # fmt: skip


LINES = [("sites_lib.c:7", "server", ""), ("sites_lib.c:8", "server", ""),
         ("sites_main.c:13", "server", ""), ("sites_main.c:16", "server", ""),
         ("sites_main.c:8", "server", "")]  # fmt: skip


def test_resolved_as_they_arrive_once_per_module_and_kept(
    collector, api_client, pg_url: str, tmp_path: Path
) -> None:
    sites_job(collector, build(tmp_path, ["-g"]))
    assert labels(api_client) == LINES
    stats = collector.service.resolver.resolver.stats
    # 5 sites in 2 modules: each module's build-id and symbols read once
    assert (stats.build_id_reads, stats.index_builds, stats.offsets) == (2, 2, 5)
    stored = query(pg_url, "SELECT file, line, quality, resolved FROM callsite_symbols "
                           "ORDER BY line, file")  # fmt: skip
    assert [(os.path.basename(f), ln, q, r) for f, ln, q, r in stored] == [
        ("sites_lib.c", 7, "line", "server"), ("sites_lib.c", 8, "line", "server"),
        ("sites_main.c", 8, "line", "server"), ("sites_main.c", 13, "line", "server"),
        ("sites_main.c", 16, "line", "server")]  # fmt: skip
    assert stored[0][0] == str(HERE / "sites_lib.c")
    # the program and its library gone, then the program rebuilt: the API still names the
    # lines (it reads the stored answers only, never a file)
    shutil.rmtree(tmp_path)
    build(tmp_path, ["-g"], extra_define="/* edited */")
    assert labels(api_client) == LINES
    assert (stats.build_id_reads, stats.index_builds) == (2, 2)


def test_before_the_resolver_answers_a_site_is_labelled_not_resolved(
    pg_url: str, api_client, tmp_path: Path
) -> None:
    with BackgroundCollector(pg_url, token="secret") as collector:
        collector.service.writer.on_sites = None  # nothing resolves until this test says so
        rows = sites_job(collector, build(tmp_path, ["-g"]))
    got = labels(api_client)
    expected = sorted(
        (f"{os.path.basename(m)}+{off:#x} (not resolved yet)", "pending",
         "not resolved yet: the collector resolves call sites as they arrive")
        for _, m, off, _, _ in rows)  # fmt: skip
    assert got == expected
    assert query(pg_url, "SELECT count(*) FROM callsite_symbols") == [(0,)]
    (job_id,) = query(pg_url, "SELECT id FROM jobs WHERE job_key = %s", (JOB,))[0]
    resolver = SiteResolver(pg_url)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        resolver.resolve_jobs(conn, [job_id])
    assert labels(api_client) == LINES


def test_rebuilt_before_any_answer_is_a_stored_fallback(
    pg_url: str, api_client, tmp_path: Path
) -> None:
    with BackgroundCollector(pg_url, token="secret") as collector:
        collector.service.writer.on_sites = None
        rows = sites_job(collector, build(tmp_path, ["-g"]))
    program = str(tmp_path / "sites")
    build(tmp_path, ["-g"], extra_define="/* edited */")  # rebuilt after the run
    (job_id,) = query(pg_url, "SELECT id FROM jobs WHERE job_key = %s", (JOB,))[0]
    with psycopg.connect(pg_url, autocommit=True) as conn:
        SiteResolver(pg_url).resolve_jobs(conn, [job_id])
    got = labels(api_client)
    mains = [g for g in got if g[0].startswith("sites+")]
    assert [g[0] for g in mains] == sorted(f"sites+{o:#x}" for _, m, o, _, _ in rows
                                           if m == program)  # fmt: skip
    assert all(g[1] == "" and g[2].startswith(f"{program} was rebuilt since the run")
               for g in mains)  # fmt: skip
    assert [g for g in got if g not in mains] == LINES[:2]  # the library was not rebuilt
    assert query(pg_url, "SELECT count(*) FROM callsite_fallbacks WHERE module = %s",
                 (program,)) == [(3,)]  # fmt: skip
    assert query(pg_url, "SELECT line FROM callsite_symbols ORDER BY line") == [(7,), (8,)]


def test_a_nodes_answer_labels_its_owners_jobs_only(
    collector, pg_url: str, api_client, tmp_path: Path
) -> None:
    rows = sites_job(collector, build(tmp_path, ["-g"]))
    (owner,) = query(pg_url, "SELECT owner_uid FROM jobs WHERE job_key = %s", (JOB,))[0]
    _, module, offset, _, _ = rows[0]
    (bid,) = query(pg_url, "SELECT DISTINCT build_id FROM callsite_paths WHERE module = %s",
                   (module,))[0]  # fmt: skip
    with psycopg.connect(pg_url, autocommit=True) as conn:
        for uid, name in ((owner, "node_main.c"), (owner + 1, "forged.c")):
            conn.execute(
                "INSERT INTO callsite_node_symbols VALUES (%s, %s, %s, 'line', 'main', 14, "
                "%s, 99, '', 0)", (uid, bid, offset, f"/node/{name}"))  # fmt: skip
    got = labels(api_client)
    assert ("node_main.c:99", "node", "") in got
    assert all("forged" not in g[0] for g in got)
    assert len(got) == 5 and ("sites_main.c:13", "server", "") not in got


def _forge_build_id(program: Path, build_id: str) -> None:
    """Write `build_id` over the program's own build-id note (what any user can do to a
    file of theirs: the note is bytes, not a proof)."""
    own = bytes.fromhex(file_build_id(str(program)) or "")
    data = program.read_bytes()
    assert len(own) == len(bytes.fromhex(build_id)) and data.count(own) == 1
    program.write_bytes(data.replace(own, bytes.fromhex(build_id)))
    assert file_build_id(str(program)) == build_id


def test_a_file_claiming_another_users_build_id_never_names_their_sites(
    pg_url: str, api_client, tmp_path: Path, user: pwd.struct_passwd, dirs: tuple[Path, Path]
) -> None:
    """User B runs the test program; user A builds it with one line added on top (the same
    code at the same offsets, every line one further down), writes B's build-id into its
    note, and runs it from A's own directory. The collector's resolver reads A's file first
    (it passes the build-id check: the note says B's build-id): A's sites name A's lines,
    B's sites still name B's true file and line."""
    b_program = build(tmp_path / "b", ["-g"])
    a_program = build(dirs[0] / "a", ["-g"], extra_define="/* A's edit */")  # A may read it
    b_bid = file_build_id(str(b_program)) or ""
    _forge_build_id(a_program, b_bid)
    b_rows, a_rows = run(b_program), run(a_program)
    b_main = [(ln, off) for ln, m, off, _, _ in b_rows if m == str(b_program)]
    a_main = [(ln, off) for ln, m, off, _, _ in a_rows if m == str(a_program)]
    # the attack's premise: the same build-id and the same offsets, other lines
    assert [o for _, o in a_main] == [o for _, o in b_main] and len(b_main) == 3
    assert [ln for ln, _ in a_main] == [ln + 1 for ln, _ in b_main]
    with BackgroundCollector(pg_url, token="secret") as collector:
        collector.service.writer.on_sites = None  # resolved below, A's job first
        sites = [site(i, "MPI_Allreduce", 4, 1, 8, 1_000) for i in range(len(b_rows))]
        seed(collector, [frame(0, 0, sites, [path(i, m, o) for i, (_, m, o, _, _)
                                             in enumerate(b_rows)])])  # fmt: skip
        tables = {"rank_info": wire.records("rank_info", [{"command": b"./sites"}]),
                  "callsite": wire.records("callsite", sites),
                  "callsite_frame": wire.records("callsite_frame", [
                      path(i, m, o) for i, (_, m, o, _, _) in enumerate(a_rows)])}  # fmt: skip
        seed(collector, [wire.encode_frame(job_id="a-job", world_rank=0, world_size=1, seq=0,
                                           interval_start_ns=T0, interval_end_ns=T0 + 10**9,
                                           token="secret", tables=tables)])  # fmt: skip
    jobs = dict(query(pg_url, "SELECT job_key, id FROM jobs"))
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("UPDATE jobs SET owner_uid = %s WHERE job_key = 'a-job'", (user.pw_uid,))
        resolver = SiteResolver(pg_url)
        resolver.resolve_jobs(conn, [jobs["a-job"]])
        resolver.resolve_jobs(conn, [jobs[JOB]])
    engine = make_engine(pg_url)
    try:
        with Session(engine) as session:
            named = {
                key: resolution.stored(
                    session, jobs[key], [(str(prog), b_bid, o) for _, o in main]
                )  # fmt: skip
                for key, prog, main in (("a-job", a_program, a_main), (JOB, b_program, b_main))
            }
    finally:
        engine.dispose()
    b_source, a_source = str(HERE / "sites_main.c"), str(dirs[0] / "a" / "sites_main.c")
    assert sorted((a["file"], a["line"], a["resolved"]) for a in named[JOB].values()) == sorted(
        (b_source, ln, "server") for ln, _ in b_main
    )
    assert sorted((a["file"], a["line"], a["resolved"]) for a in named["a-job"].values()) == (
        sorted((a_source, ln, "server") for ln, _ in a_main)
    )
    assert labels(api_client) == LINES  # B's job through the API: B's true lines
    assert query(pg_url, "SELECT module, count(*) FROM callsite_symbols WHERE build_id = %s "
                         "GROUP BY module ORDER BY module", (b_bid,)) == [
        *sorted([(str(a_program), 3), (str(b_program), 3)])]  # fmt: skip


def test_a_fallback_is_tried_again_and_never_downgraded(
    pg_url: str, api_client, tmp_path: Path
) -> None:
    with BackgroundCollector(pg_url, token="secret") as collector:
        collector.service.writer.on_sites = None
        rows = sites_job(collector, build(tmp_path, ["-g"]))
    program = tmp_path / "sites"
    away = tmp_path / "away"
    program.rename(away)  # not readable where the collector runs, for now
    (job_id,) = query(pg_url, "SELECT id FROM jobs WHERE job_key = %s", (JOB,))[0]
    with psycopg.connect(pg_url, autocommit=True) as conn:
        SiteResolver(pg_url).resolve_jobs(conn, [job_id])
        fallback = sorted(f"sites+{o:#x}" for _, m, o, _, _ in rows if m == str(program))
        assert [g[0] for g in labels(api_client) if g[0].startswith("sites+")] == fallback
        away.rename(program)  # back: a fallback within the retry period still stands
        SiteResolver(pg_url).resolve_jobs(conn, [job_id])
        assert [g[0] for g in labels(api_client) if g[0].startswith("sites+")] == fallback
    # the resolver's thread tries it again once the period has passed: lines, fallbacks gone
    # (its sweep takes the jobs seen lately: this one's frames carry a fixed time of old)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("UPDATE jobs SET last_seen_ns = %s WHERE id = %s", (time.time_ns(), job_id))
    retrying = SiteResolver(pg_url, retry_ns=300_000_000)
    retrying.start()
    try:
        deadline = time.monotonic() + 30
        while labels(api_client) != LINES and time.monotonic() < deadline:
            time.sleep(0.2)
        assert labels(api_client) == LINES
        assert query(pg_url, "SELECT count(*) FROM callsite_fallbacks") == [(0,)]
        program.unlink()  # gone again: an answer is never tried again, never downgraded
        time.sleep(1.0)
        assert retrying.idle()
        assert labels(api_client) == LINES
        assert query(pg_url, "SELECT count(*) FROM callsite_fallbacks") == [(0,)]
    finally:
        retrying.stop()


@pytest.fixture(scope="module")
def user() -> Iterator[pwd.struct_passwd]:
    """A test Unix user (its own group), the owner of the jobs below that are not root's."""
    with unix_user("r") as made:
        yield made


@pytest.fixture
def dirs() -> Iterator[tuple[Path, Path]]:
    """Under /tmp (searchable by all): a directory every user may search and read
    (`open`, 0755) and one only root may (`private`, 0700)."""
    top = Path(tempfile.mkdtemp(prefix="stacklens-owners-", dir="/tmp"))
    top.chmod(0o755)
    (top / "open").mkdir(mode=0o755)
    (top / "private").mkdir(mode=0o700)
    try:
        yield top / "open", top / "private"
    finally:
        subprocess.run(["rm", "-rf", str(top)], check=True)


def send(collector, pg_url: str, job_key: str, frames: list[dict], owner: int) -> int:
    """Job `job_key` of `owner` (rank 0 sends one call site per frame); its id."""
    sites = [site(i, "MPI_Allreduce", 4, 1, 8, 1_000) for i in range(len(frames))]
    tables = {"rank_info": wire.records("rank_info", [{"command": b"./sites"}]),
              "callsite": wire.records("callsite", sites),
              "callsite_frame": wire.records("callsite_frame", frames)}  # fmt: skip
    seed(collector, [wire.encode_frame(job_id=job_key, world_rank=0, world_size=1, seq=0,
                                       interval_start_ns=T0, interval_end_ns=T0 + 10**9,
                                       token="secret", tables=tables)])  # fmt: skip
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("UPDATE jobs SET owner_uid = %s WHERE job_key = %s", (owner, job_key))
        found = conn.execute("SELECT id FROM jobs WHERE job_key = %s", (job_key,)).fetchone()
    assert found is not None, f"job {job_key} was not stored"
    return int(found[0])


def frames_of(rows: list[tuple[int, str, int, int, int]]) -> list[dict]:
    """The recorded calls as call-site frames (module, its build-id, offset)."""
    return [path(i, m, o) for i, (_, m, o, _, _) in enumerate(rows)]


def named(pg_url: str, job_id: int, frames: list[dict]) -> dict[tuple[str, int], Any]:
    """What the server names each frame of job `job_id` with, from the stored rows:
    (module, offset) -> (quality, source file's name, line, reason, resolved); a frame
    not answered yet is absent."""
    keys = [(f["module"].decode(), f["build_id"].decode(), f["site_offset"]) for f in frames]
    engine = make_engine(pg_url)
    try:
        with Session(engine) as session:
            got = resolution.stored(session, job_id, keys)
    finally:
        engine.dispose()
    return {(m, o): (a["quality"], a["file"] and os.path.basename(a["file"]), a["line"],
                     a["reason"], a["resolved"]) for (m, _, o), a in got.items()}  # fmt: skip


def resolve(pg_url: str, job_id: int) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        SiteResolver(pg_url).resolve_jobs(conn, [job_id])


def test_a_job_naming_a_file_its_owner_cannot_read_learns_nothing(
    pg_url: str, api_client, user: pwd.struct_passwd, dirs: tuple[Path, Path]
) -> None:
    """The test user's job names the program (and its library) in root's private directory
    and a path there where nothing is: every frame gets the one neutral reason, the same
    text for the file that exists and the one that does not, and no file was opened for
    it. Root's job naming the same files is not answered by that user's fallbacks: it gets
    its lines."""
    _, private = dirs
    rows = run(build(private, ["-g"]))
    frames = frames_of(rows)
    missing = dict(frames[0], site_id=len(frames), module=str(private / "missing").encode())
    with BackgroundCollector(pg_url, token="secret") as collector:
        collector.service.writer.on_sites = None  # resolved below, the user's job first
        theirs = send(collector, pg_url, "their-job", [*frames, missing], user.pw_uid)
        roots = send(collector, pg_url, JOB, frames, 0)
    resolver = SiteResolver(pg_url)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        resolver.resolve_jobs(conn, [theirs])
    assert resolver.resolver.stats.build_id_reads == 0  # not a file opened for that job
    got = named(pg_url, theirs, [*frames, missing])
    assert got == {
        (f["module"].decode(), f["site_offset"]): (
            "module+offset", None, None,
            NOT_READABLE.format(path=f["module"].decode()), "")
        for f in [*frames, missing]}  # fmt: skip
    program = got[(str(private / "sites"), frames[0]["site_offset"])][3]
    gone = got[(str(private / "missing"), missing["site_offset"])][3]
    assert program.replace(str(private / "sites"), "<path>") == gone.replace(
        str(private / "missing"), "<path>")  # fmt: skip
    # root's job: the user's fallbacks do not answer it, its own read gives the lines
    assert named(pg_url, roots, frames) == {}
    resolve(pg_url, roots)
    assert labels(api_client) == LINES
    assert query(pg_url, "SELECT owner_uid, count(*) FROM callsite_fallbacks GROUP BY 1") == [
        (user.pw_uid, 1)]  # fmt: skip
    # the answers are shared by path (docs/callsites.md, the residual): the user's frames of
    # the files root read are named from them now; the missing file stays neutral
    after = named(pg_url, theirs, [*frames, missing])
    assert sorted((v[1], v[2], v[4]) for k, v in after.items() if k[0] != str(
        private / "missing")) == sorted((os.path.basename(f), ln, "server") for f, ln in (
        ("sites_lib.c", 7), ("sites_lib.c", 8), ("sites_main.c", 8), ("sites_main.c", 13),
        ("sites_main.c", 16)))  # fmt: skip
    assert after[(str(private / "missing"), missing["site_offset"])] == (
        "module+offset",
        None,
        None,
        gone,
        "",
    )


def test_a_fallback_is_shown_to_the_owner_it_was_found_for_only(
    pg_url: str, user: pwd.struct_passwd, dirs: tuple[Path, Path]
) -> None:
    """The program in root's private directory is rebuilt after the run: root's job gets
    the fallback that says so (with the new build-id's first hex digits); the test user's
    job naming the same frames does not see it (not answered yet), then gets its own, the
    neutral reason, and root's job keeps root's."""
    _, private = dirs
    rows = run(build(private, ["-g"]))
    frames = [f for f in frames_of(rows) if f["module"] == str(private / "sites").encode()]
    build(private, ["-g"], extra_define="/* edited */")  # rebuilt after the run
    with BackgroundCollector(pg_url, token="secret") as collector:
        collector.service.writer.on_sites = None
        roots = send(collector, pg_url, JOB, frames, 0)
        theirs = send(collector, pg_url, "their-job", frames, user.pw_uid)
    resolve(pg_url, roots)
    program = str(private / "sites")
    rebuilt = {v[3] for v in named(pg_url, roots, frames).values()}
    (reason,) = rebuilt
    assert reason.startswith(f"{program} was rebuilt since the run (build-id ")
    assert named(pg_url, theirs, frames) == {}
    resolve(pg_url, theirs)
    assert named(pg_url, theirs, frames) == {
        (program, f["site_offset"]): ("module+offset", None, None,
                                      NOT_READABLE.format(path=program), "")
        for f in frames}  # fmt: skip
    assert {v[3] for v in named(pg_url, roots, frames).values()} == {reason}
    assert query(pg_url, "SELECT owner_uid, count(*) FROM callsite_fallbacks GROUP BY 1 "
                         "ORDER BY 1") == [(0, 3), (user.pw_uid, 3)]  # fmt: skip


def test_a_file_its_owner_may_read_is_resolved_for_them(
    pg_url: str, user: pwd.struct_passwd, dirs: tuple[Path, Path]
) -> None:
    """The test user's job naming the program in a directory every user may read: its
    lines, read by the collector for that owner."""
    opened, _ = dirs
    rows = run(build(opened, ["-g"]))
    frames = frames_of(rows)
    with BackgroundCollector(pg_url, token="secret") as collector:
        collector.service.writer.on_sites = None
        theirs = send(collector, pg_url, "their-job", frames, user.pw_uid)
    resolve(pg_url, theirs)
    got = named(pg_url, theirs, frames)
    assert sorted(got.values()) == sorted(
        ("line", name, ln, "", "server") for name, ln in (
            ("sites_lib.c", 7), ("sites_lib.c", 8), ("sites_main.c", 8),
            ("sites_main.c", 13), ("sites_main.c", 16)))  # fmt: skip
