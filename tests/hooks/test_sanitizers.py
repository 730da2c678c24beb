"""The library built with AddressSanitizer + UndefinedBehaviorSanitizer (build-asan/, `make -C
mpi_pmpi_hooks asan`) under the surface and point-to-point programs, and under the
standalone I/O semantics program (direct calls, a main thread ending with pthread_exit):
the results stay exact and no sanitizer report has a stacklens frame in it.

libasan must come first in LD_PRELOAD; reports from the MPI runtime itself (whose own code
is not instrumented, but whose allocations are) are told apart by their stack frames.
"""

from __future__ import annotations

import re
import subprocess
import uuid

from stacklens.paths import HOOKS_DIR
from tests.hooks import jobs
from tests.hooks.patterns import p2p_pattern
from tests.hooks.test_surface import check_surface

ASAN_LIBRARY = HOOKS_DIR / "build-asan" / "libstacklens.so"
RANKS = 4
#: First line of a sanitizer report (ASan error or warning, UBSan runtime error).
REPORT_START = re.compile(r"ERROR: AddressSanitizer|WARNING: AddressSanitizer|runtime error:")
#: A stack frame or source location that is stacklens code.
OURS = re.compile(r"mpi_pmpi_hooks/|libstacklens\.so|\bsl_\w+")


def sanitizer_env(collector, job: str) -> dict:
    """Job environment with libasan preloaded before the sanitizer build of the library."""
    libasan = subprocess.run(
        ["gcc", "-print-file-name=libasan.so"], capture_output=True, text=True, check=True
    ).stdout.strip()
    env = jobs.job_env(collector, "openmpi", job)
    env.update(
        LD_PRELOAD=f"{libasan}:{ASAN_LIBRARY}",
        ASAN_OPTIONS="detect_leaks=0:verify_asan_link_order=0",
        UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=0",
    )
    return env


def reports(stderr: str) -> list[str]:
    """The sanitizer reports in stderr, each with the lines that follow it up to a blank line."""
    out, current = [], None
    for line in stderr.splitlines():
        if REPORT_START.search(line):
            current = [line]
            out.append(current)
        elif current is not None and line.strip():
            current.append(line)
        else:
            current = None
    return ["\n".join(r) for r in out]


def run_sanitized(collector, argv: list[str], job: str) -> subprocess.CompletedProcess:
    """Runs argv on RANKS Open MPI ranks under the sanitizer build."""
    env = sanitizer_env(collector, job)
    return jobs.finish(jobs.start(jobs.mpirun("openmpi", RANKS, argv), env), timeout=120)


def test_sanitizer_build_is_instrumented():
    assert ASAN_LIBRARY.is_file(), "run `make -C mpi_pmpi_hooks asan` (make test does)"
    needed = subprocess.run(
        ["readelf", "-d", str(ASAN_LIBRARY)], capture_output=True, text=True, check=True
    ).stdout
    assert "libasan.so" in needed and "libubsan.so" in needed


def test_report_parser_finds_stacklens_frames():
    stderr = (
        "noise\n==1==ERROR: AddressSanitizer: heap-buffer-overflow\n"
        "    #0 0x7f in sl_count_send mpi_pmpi_hooks/src/core.c:99\n\n"
        "x.c:1:2: runtime error: shift\n    #0 0x1 in opal_foo libopen-pal.so\n"
    )
    found = reports(stderr)
    assert len(found) == 2
    assert [bool(OURS.search(r)) for r in found] == [True, False]


def test_surface_and_p2p_clean_under_sanitizers(collector, pg_url, tmp_path):
    surface_job = f"asan-surface-{uuid.uuid4().hex[:8]}"
    argv = [jobs.example("openmpi", "mpi_surface"), str(tmp_path)]
    surface = run_sanitized(collector, argv, surface_job)
    p2p_job = f"asan-p2p-{uuid.uuid4().hex[:8]}"
    p2p = run_sanitized(collector, [jobs.example("openmpi", "p2p_pattern")], p2p_job)
    for result in (surface, p2p):
        assert result.returncode == 0, result.stderr
        ours = [r for r in reports(result.stderr) if OURS.search(r)]
        assert ours == [], "\n\n".join(ours)
    check_surface(pg_url, surface_job, tmp_path)
    sent, _ = jobs.p2p(pg_url, p2p_job)
    assert sent == p2p_pattern(RANKS)


def test_standalone_io_semantics_clean_under_sanitizers(collector, pg_url, tmp_path):
    from tests.hooks.test_standalone_io import CALLS, io_totals, semantics

    job = f"asan-io-{uuid.uuid4().hex[:8]}"
    env = sanitizer_env(collector, job)
    calls = semantics(["calls", str(tmp_path)], env)
    pexit = semantics(["pexit", str(tmp_path)], env)
    for result in (calls, pexit):
        assert result.returncode == 0, result.stderr
        ours = [r for r in reports(result.stderr) if OURS.search(r)]
        assert ours == [], "\n\n".join(ours)
    assert calls.stdout == CALLS
    assert io_totals(pg_url, job, tmp_path / "sem.bin") == (2, 6, 6, 4453, 4230)
    assert io_totals(pg_url, job, tmp_path / "pexit.bin") == (1, 0, 7, 0, 7 * 4096)
