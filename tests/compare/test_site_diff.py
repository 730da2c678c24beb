# tests/compare/test_site_diff.py — matching call sites across runs (pure).
"""server/compare/diff.py's call-site functions on hand-made sites: a site matches its
line in the other run even when its binary was rebuilt (other build-id and offset), an
unresolved frame matches by build-id and offset, sites of one run only are listed with
0 on the other side, the order is by absolute change, and the median of several runs is
taken site by site."""

from __future__ import annotations

from server.compare import diff


def frame(offset: int, build_id: str = "b1", line: int | None = None) -> dict:
    """A frame of phases.c's main at `line` (None: unresolved, module+offset)."""
    resolved = line is not None
    return {"frame": 0, "module": "/bin/app", "build_id": build_id, "offset": offset,
            "quality": "line" if resolved else "module+offset",
            "function": "main" if resolved else None, "file": "/src/app.c" if resolved else None,
            "line": line}  # fmt: skip


def site(label: str, op: str, frames: list[dict], time_ns: int, calls: int, nbytes: int) -> dict:
    return {"label": label, "layer": "mpi", "op": op, "frames": frames, "time_ns": time_ns,
            "calls": calls, "bytes": nbytes}  # fmt: skip


def path(s: dict) -> str:
    return f"{s['op']}@{s['label']}"


def test_sites_match_by_line_else_by_build_id_and_offset():
    a = [
        site("app.c:10", "MPI_Barrier", [frame(0x100, "old", 10)], 50, 4, 0),
        site("app.c:11", "MPI_Allreduce", [frame(0x110, "old", 11)], 300, 4, 32),
        site("app+0x900", "MPI_Send", [frame(0x900)], 1000, 2, 16),
        site("app.c:12", "MPI_Bcast", [frame(0x120, "old", 12)], 7, 4, 16),
    ]
    b = [  # rebuilt: other build-id and offsets for the same lines
        site("app.c:10", "MPI_Barrier", [frame(0x200, "new", 10)], 2050, 4, 0),
        site("app.c:11", "MPI_Allreduce", [frame(0x210, "new", 11)], 200, 4, 32),
        site("app+0x900", "MPI_Send", [frame(0x900)], 1000, 2, 16),
        site("app.c:13", "MPI_Gather", [frame(0x230, "new", 13)], 90, 4, 64),
        site("app+0x904", "MPI_Send", [frame(0x904)], 5, 2, 16),
    ]
    rows = diff.site_differences(a, b, path)
    got = [(r["label"], r["present"], r["a_ns"], r["b_ns"], r["delta_ns"], r["delta_pct"],
            r["a_calls"], r["b_calls"], r["a_bytes"], r["b_bytes"]) for r in rows]  # fmt: skip
    assert got == [
        ("app.c:10", "both", 50, 2050, 2000, 4000.0, 4, 4, 0, 0),
        ("app.c:11", "both", 300, 200, -100, -100 / 3, 4, 4, 32, 32),
        ("app.c:13", "b", 0, 90, 90, None, 0, 4, 0, 64),
        ("app.c:12", "a", 7, 0, -7, -100.0, 4, 0, 16, 0),
        ("app+0x904", "b", 0, 5, 5, None, 0, 2, 0, 16),
        ("app+0x900", "both", 1000, 1000, 0, 0.0, 2, 2, 16, 16),
    ]
    assert rows[0]["path"] == "MPI_Barrier@app.c:10" and rows[0]["op"] == "MPI_Barrier"


def test_the_same_line_with_another_op_or_caller_is_another_site():
    a = [site("app.c:10", "MPI_Barrier", [frame(0x100, line=10)], 5, 1, 0)]
    b = [site("app.c:10", "MPI_Ibarrier", [frame(0x100, line=10)], 5, 1, 0),
         site("app.c:10", "MPI_Barrier", [frame(0x100, line=10), frame(0x300, line=40)], 5, 1,
              0)]  # fmt: skip
    assert sorted(r["present"] for r in diff.site_differences(a, b, path)) == ["a", "b", "b"]


def test_the_median_of_several_runs_is_site_by_site():
    barrier = [frame(0x100, line=10)]
    runs = [
        [site("app.c:10", "MPI_Barrier", barrier, 10, 4, 0)],
        [site("app.c:10", "MPI_Barrier", barrier, 30, 6, 0),
         site("app.c:11", "MPI_Send", [frame(0x110, line=11)], 8, 2, 16)],
        [site("app.c:10", "MPI_Barrier", barrier, 20, 4, 0),
         site("app.c:11", "MPI_Send", [frame(0x110, line=11)], 4, 2, 16)],
    ]  # fmt: skip
    got = {s["label"]: (s["time_ns"], s["calls"], s["bytes"]) for s in diff.median_sites(runs)}
    assert got == {"app.c:10": (20, 4, 0), "app.c:11": (4, 2, 16)}


def test_a_family_used_in_one_run_only_is_in_that_run_only():
    """A family made in both runs (or windows) but with no time, calls or bytes in one is
    that run's only, not "in both runs"."""
    used = {"time_ns": 40, "calls": 2, "bytes": 16}
    idle = {"time_ns": 0, "calls": 0, "bytes": 0}
    a = {"rows": used, "cols": idle, "world": used, "tp": idle}
    b = {"rows": idle, "cols": used, "world": used, "tp": idle}
    rows = diff.family_differences(a, b)
    assert [(r["label"], r["present"]) for r in rows] == [
        ("cols", "b"), ("rows", "a"), ("tp", "both"), ("world", "both")]  # fmt: skip
