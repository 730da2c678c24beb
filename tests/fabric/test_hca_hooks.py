"""The hook library's local HCA counters (wire table hca) against a fixture sysfs tree.

A real 4-rank Open MPI job runs under the hooks with STACKLENS_SYSFS_ROOT pointing at a
copy of tests/fabric/fixtures/sysfs; the test moves the counter files between the
library's intervals (increments, a reset, a file that disappears and comes back) and
checks the stored per-port sums exactly, and that only the lowest rank per host reports.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.conftest import mpi_env, query

FIXTURE = Path(__file__).parent / "fixtures" / "sysfs"
HOLD_JOB = Path(__file__).parent / "hold_job.py"
INTERVAL_MS = 100
GUID = 0x0C42A1030049B8F6


def _set(counters: Path, name: str, value: int | None) -> None:
    """Replace a counter file atomically (as sysfs reads are), or remove it (None)."""
    path = counters / name
    if value is None:
        path.unlink()
        return
    tmp = counters / f".{name}.tmp"
    tmp.write_text(f"{value}\n")
    os.replace(tmp, path)


def _get(counters: Path, name: str) -> int:
    return int((counters / name).read_text())


def _sampled_after(pg_url: str, job: str, t_ns: int, timeout: float = 60.0) -> None:
    """Wait until every rank sent a frame whose interval started after t_ns."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        rows = query(
            pg_url,
            "SELECT count(*), min(ranks.last_seen_ns) FROM ranks JOIN jobs ON jobs.id = job_id "
            "WHERE job_key = %s",
            (job,),
        )
        count, oldest = rows[0]
        if count == 4 and oldest > t_ns + 2 * INTERVAL_MS * 10**6:
            return
        time.sleep(0.05)
    raise AssertionError("the ranks did not send frames in time")


def _final_frames_stored(pg_url: str, job: str, timeout: float = 60.0) -> None:
    """Wait until the run's final frame of every rank is stored (all four ranks finished):
    the last deltas, acknowledged before the ranks exited or delivered from the spool by
    `stacklens run`, are then all in the database."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        rows = query(
            pg_url,
            "SELECT count(*) FILTER (WHERE finished) FROM ranks JOIN jobs ON jobs.id = job_id "
            "WHERE job_key = %s",
            (job,),
        )
        if rows[0][0] == 4:
            return
        time.sleep(0.05)
    raise AssertionError("the ranks' final frames were not stored in time")


def test_host_counters_are_sent_as_exact_deltas(tmp_path, collector, pg_url, hook_library):
    pytest.importorskip("mpi4py")
    root = tmp_path / "sysfs"
    shutil.copytree(FIXTURE, root)
    p1 = root / "mlx5_0" / "ports" / "1" / "counters"
    p2 = root / "mlx5_0" / "ports" / "2" / "counters"
    stop = tmp_path / "stop"
    job = f"hca-{uuid.uuid4().hex[:8]}"
    env = mpi_env(
        STACKLENS_COLLECTOR=collector.endpoint,
        STACKLENS_INGEST_TOKEN="secret",
        STACKLENS_INGEST_AUTH="trusted",
        STACKLENS_INTERVAL_MS=str(INTERVAL_MS),
        STACKLENS_JOB_ID=job,
        STACKLENS_SYSFS_ROOT=str(root),
        # the ranks wait for the collector to acknowledge every frame, the last included,
        # however slow a loaded machine makes it (the default 5 s would spool them)
        STACKLENS_FINALIZE_TIMEOUT_MS="60000",
    )
    program = [sys.executable, str(HOLD_JOB), str(stop)]
    # Ranks 0, 1 on host "nodeA", ranks 2, 3 on "nodeB": ranks 0 and 2 report.
    mpirun = ["mpirun", "-np", "2", "-x", "STACKLENS_HOST=nodeA", *program]
    mpirun += [":", "-np", "2", "-x", "STACKLENS_HOST=nodeB", *program]
    proc = subprocess.Popen(
        [sys.executable, "-m", "stacklens_cli", "run", "--", *mpirun],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        _sampled_after(pg_url, job, time.time_ns())  # baselines are read

        def step(changes: list[tuple[Path, str, int | None]]) -> None:
            for counters, name, value in changes:
                _set(counters, name, value)
            _sampled_after(pg_url, job, time.time_ns())

        # Increments: +250 words sent, +1000 words received, packets, wait, link downed.
        step(
            [
                (p1, "port_xmit_data", _get(p1, "port_xmit_data") + 250),
                (p1, "port_rcv_data", _get(p1, "port_rcv_data") + 1000),
                (p1, "port_xmit_packets", _get(p1, "port_xmit_packets") + 10),
                (p1, "port_rcv_packets", _get(p1, "port_rcv_packets") + 20),
                (p1, "port_xmit_wait", _get(p1, "port_xmit_wait") + 5),
                (p1, "link_downed", _get(p1, "link_downed") + 1),
                (p2, "port_rcv_data", _get(p2, "port_rcv_data") + 25),
            ]
        )
        # A reset of port_xmit_data (that interval's delta is unknown), and +500 words
        # received. The library may read the two files in two intervals: the reset's
        # record is sent either way (a counter known before is unknown now).
        step(
            [
                (p1, "port_rcv_data", _get(p1, "port_rcv_data") + 500),
                (p1, "port_xmit_data", 100),
            ]
        )
        # After the reset, +1000 words from the new baseline; port 2 loses a file.
        step(
            [
                (p1, "port_xmit_data", 1100),
                (p1, "symbol_error", _get(p1, "symbol_error") + 3),
                (p2, "port_rcv_data", None),
            ]
        )
        step([(p2, "port_rcv_data", 5000)])  # back: a new baseline, no delta
        step([(p2, "port_rcv_data", 5010)])  # +10 words
        stop.touch()
        out, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
            proc.communicate()
    assert proc.returncode == 0, err
    assert "stacklens:" not in err, err
    _final_frames_stored(pg_url, job)

    columns = (
        "xmit_bytes, rcv_bytes, xmit_pkts, rcv_pkts, xmit_wait, symbol_errors, "
        "link_error_recovery, link_downed, rcv_errors, xmit_discards, vl15_dropped"
    )
    sums = query(
        pg_url,
        f"SELECT world_rank, device, port, node_guid, "
        f"{', '.join(f'sum({c})' for c in columns.split(', '))} "
        "FROM hca_deltas JOIN jobs ON jobs.id = job_id WHERE job_key = %s "
        "GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3",
        (job,),
    )
    port1 = (4 * 250 + 4 * 1000, 4 * 1000 + 4 * 500, 10, 20, 5, 3, 0, 1, 0, 0, 0)
    # Port 2: port_xmit_data stands at 2^32 - 1 (saturated: unknown) and there is no
    # port_xmit_wait file (unknown): NULL, never 0.
    port2 = (None, 4 * 25 + 4 * 10, 0, 0, None, 0, 0, 0, 0, 0, 0)
    assert sums == [
        (rank, "mlx5_0", port, GUID, *expected)
        for rank in (0, 2)
        for port, expected in ((1, port1), (2, port2))
    ]
    # The reset interval was sent (its rcv_bytes moved) with xmit_bytes unknown.
    assert query(
        pg_url,
        "SELECT world_rank, count(*) FROM hca_deltas JOIN jobs ON jobs.id = job_id "
        "WHERE job_key = %s AND port = 1 AND xmit_bytes IS NULL GROUP BY 1 ORDER BY 1",
        (job,),
    ) == [(0, 1), (2, 1)]
    assert query(
        pg_url,
        "SELECT DISTINCT host, world_rank FROM ranks JOIN jobs ON jobs.id = job_id "
        "WHERE job_key = %s ORDER BY 2",
        (job,),
    ) == [("nodeA", 0), ("nodeA", 1), ("nodeB", 2), ("nodeB", 3)]


def test_hca_records_validate_guid_and_mask():
    """A GUID uses all 64 bits (high bit set is fine); mask bits beyond the 11 counters
    are refused."""
    from stacklens.wire import SPEC, FrameError, decode_body, decode_header, encode_frame
    from stacklens.wire import records as wire_records

    def frame(**fields) -> bytes:
        hca = wire_records("hca", [{"device": b"mlx5_0", "port": 1, **fields}])
        return encode_frame(
            job_id="j", world_rank=0, world_size=1, seq=0, interval_start_ns=1,
            interval_end_ns=2, tables={"hca": hca},
        )  # fmt: skip

    def decode(raw: bytes):
        header = decode_header(raw, 1 << 20)
        return decode_body(header, raw[SPEC.header.itemsize :])

    ok = decode(frame(node_guid=0xF452140300AABB01, valid=(1 << 11) - 1, xmit_bytes=8))
    assert int(ok.tables["hca"]["node_guid"][0]) == 0xF452140300AABB01
    with pytest.raises(FrameError, match="valid mask"):
        decode(frame(valid=1 << 11))
