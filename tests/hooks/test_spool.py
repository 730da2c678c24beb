"""The spool directory of the hooks: rejected frames, the per-user default, and what it
refuses.

* A frame the collector rejects (here: a collector started with a stale ingest token,
  then the right one on the same port) is kept in the spool's rejected/ folder and counted
  lost; every sequence number is either stored or kept there, and the bytes of both add up
  to exactly what the program wrote.
* Without STACKLENS_SPOOL_DIR the hooks spool into ${TMPDIR}/stacklens-spool-<uid>,
  created 0700, where `stacklens replay --all-users` finds it; a directory of that name
  owned by another user, or a symlink, is refused (one warning, nothing spooled); a name
  planted in the spool (a symlink at a spool file's .tmp name) is never followed.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from collector.service import BackgroundCollector
from stacklens import wire
from tests.conftest import free_port, mpi_env, query
from tests.hooks import jobs

#: Writes 100 bytes to argv[1] every 20 ms until argv[2] exists; prints how many times.
WRITER = """
import os, sys, time
n = 0
with open(sys.argv[1], "wb", buffering=0) as out:
    while not os.path.exists(sys.argv[2]):
        out.write(b"w" * 100)
        n += 1
        time.sleep(0.02)
print(n)
"""


def hooks_env(hook_library, collector: str, job: str, **extra: str) -> dict:
    """A standalone program attached to the collector at `collector`."""
    return mpi_env(
        LD_PRELOAD=str(hook_library),
        STACKLENS_COLLECTOR=collector,
        STACKLENS_INGEST_TOKEN="secret",
        STACKLENS_INGEST_AUTH="trusted",
        STACKLENS_INTERVAL_MS="50",
        STACKLENS_JOB_ID=job,
        **extra,
    )


def wait_for(predicate, what: str, timeout: float = 60) -> None:
    """Polls predicate until it holds; fails after timeout."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_rejected_frames_are_kept_and_counted_lost(pg_url, hook_library, tmp_path):
    job, port = f"rejected-{uuid.uuid4().hex[:8]}", free_port()
    spool, out, stop = tmp_path / "spool", tmp_path / "out.bin", tmp_path / "stop"
    env = hooks_env(hook_library, f"127.0.0.1:{port}", job, STACKLENS_SPOOL_DIR=str(spool))
    rejected = spool / "rejected"
    with BackgroundCollector(pg_url, token="stale", listen=f"127.0.0.1:{port}"):
        proc = jobs.start([sys.executable, "-c", WRITER, str(out), str(stop)], env)
        wait_for(lambda: len(list(rejected.glob("*.slf"))) >= 3, "three rejected frames")
    with BackgroundCollector(pg_url, token="secret", listen=f"127.0.0.1:{port}"):
        stop.touch()
        result = jobs.finish(proc, timeout=60)
        assert result.returncode == 0, result.stderr
        writes = int(result.stdout)
    kept = [path.read_bytes() for path in sorted(rejected.glob("*.slf"))]
    frames = [wire.decode_body(h, raw[wire.HEADER_SIZE :]) for h, raw in
              ((wire.decode_header(raw, 1 << 30), raw) for raw in kept)]  # fmt: skip
    assert {f.header.token for f in frames} == {b"secret"}  # valid frames, refused
    stored = query(
        pg_url,
        "SELECT seq FROM received_frames JOIN jobs ON jobs.id = job_id WHERE job_key = %s",
        (job,),
    )
    seqs = sorted([s for (s,) in stored] + [f.header.seq for f in frames])
    assert seqs == list(range(len(seqs)))  # every frame stored or kept: none dropped
    [(lost, status)] = query(
        pg_url,
        "SELECT frames_dropped, status FROM ranks JOIN jobs ON jobs.id = job_id WHERE job_key = %s",
        (job,),
    )
    assert (lost, status) == (len(frames), "finished")
    path = str(out.resolve())
    [(stored_bytes,)] = query(
        pg_url,
        "SELECT sum(bytes_written) FROM io_deltas JOIN jobs ON jobs.id = job_id "
        "WHERE job_key = %s AND path = %s",
        (job, path),
    )
    io = [f.tables["io"] for f in frames if "io" in f.tables]
    kept_bytes = sum(int(r["bytes_written"][r["path"] == path.encode()].sum()) for r in io)
    assert stored_bytes + kept_bytes == 100 * writes
    assert list(spool.glob("*.slf")) == []  # the rest delivered


def run_spooler(env: dict, workdir: Path, user: str | None = None, before=None):
    """Runs tests/spooler against an unreachable collector (as `user` if given); calls
    before(pid) while it waits for its go line. Returns the CompletedProcess."""
    cmd = [jobs.program("openmpi", "spooler"), str(workdir / "out.bin")]
    if user is not None:
        cmd = ["setpriv", f"--reuid={user}", f"--regid={user}", "--init-groups", *cmd]
    proc = subprocess.Popen(
        cmd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, start_new_session=True,
    )  # fmt: skip
    try:
        if before is not None:
            before(proc.pid)
        out, err = proc.communicate("go\n", timeout=60)
    finally:
        jobs.kill_group(proc)
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def spool_warnings(stderr: str) -> list[str]:
    """The library's warnings about the spool directory (not about the collector)."""
    return [line for line in jobs.library_warnings(stderr) if ": spool " in line]


@contextlib.contextmanager
def shared_tmp():
    """A directory like /tmp (mode 1777) for TMPDIR; removed afterwards."""
    path = Path(tempfile.mkdtemp(prefix="stacklens-tmp-", dir="/tmp"))
    path.chmod(0o1777)
    try:
        yield path
    finally:
        subprocess.run(["rm", "-rf", str(path)], check=False)


def test_default_spool_is_per_user_and_replayed_for_all_users(collector, pg_url, hook_library):
    job = f"default-spool-{uuid.uuid4().hex[:8]}"
    with shared_tmp() as tmp:
        env = hooks_env(hook_library, f"127.0.0.1:{free_port()}", job, TMPDIR=str(tmp))
        env.pop("STACKLENS_SPOOL_DIR", None)
        result = run_spooler(env, tmp)
        assert result.returncode == 0, result.stderr
        spool = tmp / f"stacklens-spool-{os.geteuid()}"
        assert spool.stat().st_mode & 0o777 == 0o700
        assert list(spool.glob("*.slf"))
        admin = {k: v for k, v in os.environ.items() if not k.startswith("STACKLENS_")}
        admin.update(STACKLENS_COLLECTOR=collector.endpoint, STACKLENS_INGEST_TOKEN="secret",
                     STACKLENS_INGEST_AUTH="trusted", TMPDIR=str(tmp))  # fmt: skip
        replay = subprocess.run(
            [sys.executable, "-m", "stacklens_cli", "replay", "--all-users"],
            env=admin, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert replay.returncode == 0, replay.stderr
        assert list(spool.glob("*.slf")) == []
    like = (job,)
    [(written,)] = query(
        pg_url,
        "SELECT sum(bytes_written) FROM io_deltas JOIN jobs ON jobs.id = job_id "
        "WHERE job_key = %s AND path LIKE '%%/out.bin'",
        like,
    )
    [(finished, spooled)] = query(
        pg_url,
        "SELECT finished, frames_spooled FROM ranks JOIN jobs ON jobs.id = job_id "
        "WHERE job_key = %s",
        like,
    )
    [(frames,)] = query(
        pg_url,
        "SELECT count(*) FROM received_frames JOIN jobs ON jobs.id = job_id WHERE job_key = %s",
        like,
    )
    # Every frame went through the spool, and the count says so, the final frame included.
    assert (written, finished, spooled) == (100, True, frames)


def test_another_users_directory_or_a_symlink_is_refused(hook_library):
    user = f"slsp{uuid.uuid4().hex[:6]}"
    subprocess.run(["useradd", "-M", user], check=True)
    try:
        uid = pwd.getpwnam(user).pw_uid
        with shared_tmp() as tmp:
            env = hooks_env(hook_library, f"127.0.0.1:{free_port()}", "other", TMPDIR=str(tmp))
            env.pop("STACKLENS_SPOOL_DIR", None)
            planted = tmp / f"stacklens-spool-{uid}"
            planted.mkdir(mode=0o777)  # root's, not the user's
            planted.chmod(0o777)
            result = run_spooler(env, tmp, user=user)
            assert result.returncode == 0, result.stderr
            warnings = spool_warnings(result.stderr)
            assert len(warnings) == 1 and "owned by another user: refused" in warnings[0]
            assert list(planted.iterdir()) == []
            # A symlink of that name, to a directory the user owns, is refused too.
            planted.rmdir()
            target = tmp / "elsewhere"
            target.mkdir()
            os.chown(target, uid, uid)
            planted.symlink_to(target)
            result = run_spooler(env, tmp, user=user)
            warnings = spool_warnings(result.stderr)
            assert len(warnings) == 1 and "symlink" in warnings[0], result.stderr
            assert list(target.iterdir()) == []
    finally:
        subprocess.run(["userdel", user], check=False)


def test_a_planted_name_in_the_spool_is_not_followed(hook_library, tmp_path):
    spool, victim = tmp_path / "spool", tmp_path / "victim"
    spool.mkdir(mode=0o700)
    victim.write_bytes(b"precious")
    env = hooks_env(hook_library, f"127.0.0.1:{free_port()}", "plant",
                    STACKLENS_SPOOL_DIR=str(spool))  # fmt: skip

    def plant(pid: int) -> None:
        for seq in range(4):  # the .tmp names the frames will be written under
            name = f"plant.{0:016x}.{0:010d}.{seq:020d}.{pid}.slf.tmp"  # run 0: no MPI
            (spool / name).symlink_to(victim)

    result = run_spooler(env, tmp_path, before=plant)
    assert result.returncode == 0, result.stderr
    assert victim.read_bytes() == b"precious"
    spooled = sorted(spool.glob("*.slf"))
    assert spooled and all(p.is_file() and not p.is_symlink() for p in spooled)
    # Each frame's planted .tmp link was removed, not written through; the others remain.
    headers = [wire.decode_header(p.read_bytes(), 1 << 30) for p in spooled]
    assert all(h.job_id == "plant" and h.run_id == 0 for h in headers)
    left = sorted(p.name for p in spool.glob("*.tmp"))
    pid = headers[0].pid
    unused = sorted(set(range(4)) - {h.seq for h in headers})
    assert left == [f"plant.{0:016x}.{0:010d}.{seq:020d}.{pid}.slf.tmp" for seq in unused]


def test_the_node_total_is_bounded_for_all_processes_together(hook_library, tmp_path):
    """STACKLENS_SPOOL_NODE_MAX_MB bounds the spool directory, whatever wrote it: with the
    directory short of the cap by room for one frame of the spooler but not two (its size,
    measured first, depends on the length of the program's path, which its call sites
    carry), four processes that each spool that frame at once leave exactly one there; the
    three others say why, once each. Without the node bound all four would be spooled."""
    alone = tmp_path / "alone"
    measure = hooks_env(hook_library, f"127.0.0.1:{free_port()}", "node-cap",
                        STACKLENS_SPOOL_DIR=str(alone))  # fmt: skip
    assert run_spooler(measure, tmp_path).returncode == 0
    (frame_size,) = [p.stat().st_size for p in alone.glob("node-cap.*.slf")]
    room = frame_size + frame_size // 2
    spool = tmp_path / "spool"
    (spool / "rejected").mkdir(parents=True, mode=0o700)
    spool.chmod(0o700)
    cap = 1 << 20
    (spool / "earlier.slf").write_bytes(b"x" * (cap - room - 100))
    (spool / "rejected" / "refused.slf").write_bytes(b"y" * 100)  # rejected/ counts too
    env = hooks_env(hook_library, f"127.0.0.1:{free_port()}", "node-cap",
                    STACKLENS_SPOOL_DIR=str(spool), STACKLENS_SPOOL_NODE_MAX_MB="1")  # fmt: skip
    cmd = [jobs.program("openmpi", "spooler"), str(tmp_path / "out.bin")]
    procs = [
        subprocess.Popen(cmd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, start_new_session=True)
        for _ in range(4)
    ]  # fmt: skip
    try:
        for proc in procs:
            proc.stdin.write("go\n")
            proc.stdin.flush()
        results = [proc.communicate(timeout=60) for proc in procs]
    finally:
        for proc in procs:
            jobs.kill_group(proc)
    assert [proc.returncode for proc in procs] == [0] * 4, results
    frames = sorted(spool.glob("node-cap.*.slf"))
    assert [p.stat().st_size for p in frames] == [frame_size]
    total = sum(p.stat().st_size for p in spool.rglob("*") if p.is_file())
    assert total == cap - room + frame_size <= cap
    warnings = [spool_warnings(err) for _, err in results]
    assert sorted(len(w) for w in warnings) == [0, 1, 1, 1], warnings
    assert all("node cap STACKLENS_SPOOL_NODE_MAX_MB reached" in w[0] for w in warnings if w)
