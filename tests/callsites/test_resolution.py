# tests/callsites/test_resolution.py — frames resolved by the server and stored (real PostgreSQL).
"""server/callsites/resolution.py over the call-site test programs (tests/symbols): a frame
the server can read resolves to its exact line and is stored, so it survives the file's
removal and a rebuild; a rebuilt file found before any answer was stored gives the
fallback, never a line, and is not stored; a node's answer replaces the server's."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from sqlalchemy.orm import Session

from server.callsites import resolution
from stacklens.db import make_engine
from stacklens.symbols import Resolver, file_build_id
from tests.conftest import query
from tests.symbols.programs import HERE, build, run


def frames_of(rows: list[tuple[int, str, int, int, int]], ids: dict[str, str | None]) -> list[dict]:
    return [{"frame": 0, "module": m, "build_id": ids[m] or "", "offset": bias}
            for _, m, bias, _, _ in rows]  # fmt: skip


def test_resolved_once_stored_and_kept(pg_url: str, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(resolution, "RESOLVER", Resolver())
    program = build(tmp_path, ["-g"])
    rows = run(program)
    ids = {m: file_build_id(m) for _, m, _, _, _ in rows}
    frames = frames_of(rows, ids)
    engine = make_engine(pg_url)
    with Session(engine) as session, session.begin():
        found = resolution.resolve(session, frames)
    got = [found[("", f["build_id"], f["offset"])] for f in frames]
    assert [(os.path.basename(g["file"]), g["line"], g["quality"], g["resolved"]) for g in got] == [
        ("sites_main.c", 13, "line", "server"), ("sites_main.c", 8, "line", "server"),
        ("sites_lib.c", 7, "line", "server"), ("sites_lib.c", 8, "line", "server"),
        ("sites_main.c", 16, "line", "server")]  # fmt: skip
    stored = query(pg_url, "SELECT build_id, site_offset, file, line, quality, resolved "
                           "FROM callsite_symbols ORDER BY line, file")  # fmt: skip
    assert len(stored) == 5
    assert {(r[0], r[1]) for r in stored} == {(f["build_id"], f["offset"]) for f in frames}
    # the program and its library gone, then the program rebuilt: the stored lines stay
    shutil.rmtree(tmp_path)
    build(tmp_path, ["-g"], extra_define="/* edited */")
    monkeypatch.setattr(resolution, "RESOLVER", Resolver())
    with Session(engine) as session, session.begin():
        again = resolution.resolve(session, frames)
    assert [again[("", f["build_id"], f["offset"])]["line"] for f in frames] == [13, 8, 7, 8, 16]
    assert (
        str(HERE / "sites_main.c")
        == again[("", frames[0]["build_id"], frames[0]["offset"])]["file"]
    )
    # a node's answer replaces the server's; a server answer never replaces a node's
    bid, off = frames[0]["build_id"], frames[0]["offset"]
    node = {"build_id": bid, "site_offset": off, "quality": "line", "function": "main",
            "function_offset": 14, "file": "/node/sites_main.c", "line": 13, "reason": "",
            "resolved": "node"}  # fmt: skip
    with Session(engine) as session, session.begin():
        resolution.store(session, [node])
        resolution.store(session, [{**node, "file": "/server/x.c", "resolved": "server"}])
    kept = query(pg_url, 'SELECT file, resolved FROM callsite_symbols WHERE build_id = %s '
                 'AND site_offset = %s', (bid, off))  # fmt: skip
    assert kept == [("/node/sites_main.c", "node")]
    engine.dispose()


def test_rebuilt_before_any_answer_is_never_stored(
    pg_url: str, tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.setattr(resolution, "RESOLVER", Resolver())
    program = build(tmp_path, ["-g"])
    rows = run(program)
    ids = {m: file_build_id(m) for _, m, _, _, _ in rows}
    build(tmp_path, ["-g"], extra_define="/* edited */")  # rebuilt after the run
    frames = frames_of(rows, ids) + [{"frame": 0, "module": str(program), "build_id": "",
                                      "offset": rows[0][2]}]  # fmt: skip
    engine = make_engine(pg_url)
    with Session(engine) as session, session.begin():
        found = resolution.resolve(session, frames)
    mains = [found[("", ids[str(program)], r[2])] for r in rows if r[1] == str(program)]
    assert all(m["quality"] == "module+offset" and m["line"] is None for m in mains)
    assert all(m["reason"].startswith(f"{program} was rebuilt since the run") for m in mains)
    assert found[(str(program), "", rows[0][2])]["reason"] == (
        "the module had no build-id when it ran, so no file can be proven to be it"
    )
    # only the library's two sites (not rebuilt) were stored
    assert query(pg_url, "SELECT line FROM callsite_symbols ORDER BY line") == [(7,), (8,)]
    engine.dispose()
