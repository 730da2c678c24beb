"""`stacklens fabric-sim` runs in bounded memory: it reads the simulator's console output
incrementally and empties the log as it goes, so neither its memory, its CPU per interval
nor the log on disk grows with uptime. Short form in the normal suite; the 10-minute soak
runs with `-m slow`."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from emulator.ibsim import LOG_MAX_BYTES

#: Memory the emulator may gain after its warm-up (allocator noise, not a leak).
RSS_SLACK_BYTES = 8 << 20


def _rss(pid: int) -> int:
    """Resident memory of a process in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise ProcessLookupError(pid)  # exited: a zombie has no resident memory


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def soak(workdir: Path, seconds: float) -> dict[str, float]:
    """Run fabric-sim (32 hosts, a sweep every 50 ms) for `seconds`; assert memory, CPU and
    the log stay bounded; the figures."""
    state = workdir / "state"
    env = {**os.environ, "STACKLENS_STATE_DIR": str(state)}
    cmd = [sys.executable, "-m", "stacklens_cli", "fabric-sim", "--hosts", "32"]
    cmd += ["--interval", "0.05", "--no-jobs", "--for", str(seconds)]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, text=True)
    try:
        log = state / "fabric-sim" / "run" / "ibsim.log"
        assert proc.stdout is not None and "fabric-sim:" in proc.stdout.readline()
        start = time.monotonic()
        rss, cpu, log_sizes = [], [], []
        while proc.poll() is None:
            elapsed = time.monotonic() - start
            try:
                rss.append((elapsed, _rss(proc.pid)))
                cpu.append((elapsed, _cpu_s(proc.pid)))
                log_sizes.append(log.stat().st_size)
            except (FileNotFoundError, ProcessLookupError):
                break  # exiting
            time.sleep(0.5)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    warm = [r for t, r in rss if t >= seconds / 4]
    growth = max(warm) - warm[0]
    assert growth < RSS_SLACK_BYTES, f"RSS grew {growth} bytes after warm-up"
    assert max(log_sizes) <= LOG_MAX_BYTES + (1 << 20)
    emptied = sum(b < a for a, b in zip(log_sizes, log_sizes[1:], strict=False))
    assert emptied >= 1, f"the log never reached {LOG_MAX_BYTES} bytes: {max(log_sizes)}"
    # CPU per second of the second half is not above the first half's (± 50 %).
    half = [c for t, c in cpu if t >= seconds / 2]
    first = [c for t, c in cpu if seconds / 8 <= t < seconds / 2]
    rate1 = (first[-1] - first[0]) / (seconds * 3 / 8)
    rate2 = (half[-1] - half[0]) / (seconds / 2)
    assert rate2 <= 1.5 * rate1 + 0.05, (rate1, rate2)
    return {
        "rss_growth_mb": growth / 2**20,
        "cpu_first_half": rate1,
        "cpu_second_half": rate2,
        "log_emptied": emptied,
        "log_max_bytes": max(log_sizes),
    }


def test_fabric_sim_memory_is_flat_short(scratch_root: Path):
    figures = soak(scratch_root / "soak-short", 40)
    print("fabric-sim soak 40 s:", figures)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_fabric_sim_memory_is_flat_for_10_minutes(scratch_root: Path):
    figures = soak(scratch_root / "soak-long", 600)
    print("fabric-sim soak 600 s:", figures)
