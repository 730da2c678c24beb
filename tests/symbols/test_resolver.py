# tests/symbols/test_resolver.py — truth of call-site resolution (issue #26 points 2 and 5).
"""Programs with call sites on known lines (sites_main.c, sites_lib.c), built here with gcc,
run with ASLR on; record.c stands in for the hooks' capture and prints, for each call, the
line the caller passed, its module, its offsets (from the load bias and from the first
mapping) and the absolute return address. Every site must resolve to exactly that file
and line; a stripped binary and a binary rebuilt after the run give the documented
fallback and never a line."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from elftools.elf.elffile import ELFFile

from stacklens.symbols import (
    FUNCTION_OFFSET,
    LINE,
    MODULE_OFFSET,
    Resolver,
    Site,
    file_build_id,
)
from tests.symbols.programs import FUNCTIONS, HERE, build, run

#: The offsets a recorded call gives: from the load bias, or from the first mapping.
BASES = ("bias", "mapped")


def resolve(rows: list[tuple[int, str, int, int, int]], basis: str = "bias",
            resolver: Resolver | None = None, build_ids: dict[str, str | None] | None = None
            ) -> list[tuple[int, Site]]:  # fmt: skip
    """Each recorded call resolved (its offset from the load bias, or from the module's first
    mapping), with the line it was made from."""
    resolver = resolver or Resolver()
    ids = build_ids or {m: file_build_id(m) for _, m, _, _, _ in rows}
    out = []
    for line, module, bias, mapped, _ in rows:
        offset = bias if basis == "bias" else mapped
        (site,) = resolver.resolve(module, ids[module], [offset])
        out.append((line, site))
    return out


def source_of(module: str) -> str:
    """The source file of a module's call sites."""
    return "sites_lib.c" if module.endswith(".so") else "sites_main.c"


@pytest.fixture(scope="module")
def aslr() -> None:
    assert Path("/proc/sys/kernel/randomize_va_space").read_text().strip() != "0", "ASLR off"


@pytest.mark.parametrize("variant", ["dwarf5", "dwarf4", "no-aranges"])
def test_pie_under_aslr_every_site_to_its_line(tmp_path: Path, aslr: None, variant: str) -> None:
    """A PIE and a shared library run twice: the addresses move, the offsets do not, and
    every call resolves to its file, line and function, from either offset basis. Without
    .debug_aranges (as clang writes) the CUs are found from their line programs."""
    program = build(tmp_path, ["-gdwarf-4"] if variant == "dwarf4" else ["-g"])
    if variant == "no-aranges":
        for module in (program, tmp_path / "libsites.so"):
            subprocess.run(["objcopy", "--remove-section=.debug_aranges", module], check=True)
            with open(module, "rb") as f:
                assert ELFFile(f).get_section_by_name(".debug_aranges") is None
    first, second = run(program), run(program)
    # ASLR moved the program and the library between the runs; the offsets did not move
    assert [r[4] for r in first] != [r[4] for r in second]
    assert [r[:4] for r in first] == [r[:4] for r in second]
    assert [r[0] for r in first] == [13, 8, 7, 8, 16]
    assert [r[1] for r in first] == [str(program)] * 2 + [str(tmp_path / "libsites.so")] * 2 + [
        str(program)
    ]
    for basis in BASES:
        for row, (line, site) in zip(first, resolve(first, basis), strict=True):
            name = source_of(row[1])
            assert (site.quality, site.reason) == (LINE, "")
            assert site.file == str(HERE / name)
            assert site.line == line
            assert site.function == FUNCTIONS[(name, line)]


def test_fixed_address_executable(tmp_path: Path) -> None:
    """A non-PIE program: bias 0, its offsets are absolute addresses; from the first mapping
    (dli_fbase, 0x400000) they are small, and either form resolves to the same line."""
    program = build(tmp_path, ["-g"], pie=False)
    rows = run(program)
    main_rows = [r for r in rows if r[1] == str(program)]
    assert all(r[2] == r[4] and r[2] - r[3] == 0x400000 for r in main_rows)
    for basis in BASES:
        got = [
            (line, s.quality, os.path.basename(s.file or ""), s.line)
            for line, s in resolve(rows, basis)
        ]
        assert got == [(13, LINE, "sites_main.c", 13), (8, LINE, "sites_main.c", 8),
                       (7, LINE, "sites_lib.c", 7), (8, LINE, "sites_lib.c", 8),
                       (16, LINE, "sites_main.c", 16)]  # fmt: skip
    # the map-start offsets sent as if they were bias offsets: taken as map-start (ET_EXEC)
    sites = Resolver().resolve(str(program), file_build_id(program), [r[3] for r in main_rows])
    assert [s.line for s in sites] == [13, 8, 16]


def test_two_sites_of_one_function_are_two_lines(tmp_path: Path) -> None:
    """Two calls of the same function from one function (main, lines 13 and 16): two
    offsets, two lines."""
    rows = run(build(tmp_path, ["-g"]))
    mains = [(line, s) for line, s in resolve(rows) if s.function == "main"]
    assert [(line, s.line) for line, s in mains] == [(13, 13), (16, 16)]
    assert mains[0][1].offset != mains[1][1].offset


def test_stripped_debug_info_degrades_to_function_offset(tmp_path: Path) -> None:
    program = build(tmp_path, ["-g"])
    rows = run(program)
    ids = {m: file_build_id(m) for _, m, _, _, _ in rows}
    for module in ids:
        subprocess.run(["strip", "--strip-debug", module], check=True)
        assert file_build_id(module) == ids[module]  # strip keeps the build-id
    got = resolve(rows, build_ids=ids)
    for _, site in got:
        assert site.quality == FUNCTION_OFFSET
        assert site.file is None and site.line is None
        assert site.reason == "no DWARF line information (stripped or built without -g)"
    assert [(s.function, s.label("x")) for _, s in got] == [
        (s.function, f"{s.function}+{s.function_offset:#x}") for _, s in got
    ]
    assert [s.function for _, s in got] == ["main", "halo", "lib_exchange", "lib_exchange",
                                             "main"]  # fmt: skip
    # the offset in the function is the return address's, as a backtrace prints it
    (lib_a, lib_b) = [s for _, s in got if s.function == "lib_exchange"]
    assert lib_a.function_offset is not None and lib_b.function_offset is not None
    assert lib_b.function_offset - lib_a.function_offset == lib_b.offset - lib_a.offset


def test_fully_stripped_program_and_library(tmp_path: Path) -> None:
    """strip --strip-all: the program has no symbols left (module+offset, "stripped"); the
    library still exports lib_exchange in its dynamic symbols (function+offset, says so)."""
    program = build(tmp_path, ["-g"])
    rows = run(program)
    ids = {m: file_build_id(m) for _, m, _, _, _ in rows}
    for module in ids:
        subprocess.run(["strip", "--strip-all", module], check=True)
    got = resolve(rows, build_ids=ids)
    assert [(line, s.quality, s.function, s.reason) for line, s in got] == [
        (13, MODULE_OFFSET, None, "the module is stripped"),
        (8, MODULE_OFFSET, None, "the module is stripped"),
        (7, FUNCTION_OFFSET, "lib_exchange", "no DWARF line information (stripped or built "
         "without -g); function from the dynamic symbols"),
        (8, FUNCTION_OFFSET, "lib_exchange", "no DWARF line information (stripped or built "
         "without -g); function from the dynamic symbols"),
        (16, MODULE_OFFSET, None, "the module is stripped"),
    ]  # fmt: skip
    assert got[0][1].label(str(program)) == f"sites+{rows[0][2]:#x}"


def test_separate_debug_file_by_build_id(tmp_path: Path) -> None:
    """A stripped program whose debug file is under <root>/.build-id/xx/rest.debug (as
    Debian's -dbgsym packages install them) resolves to lines."""
    program = build(tmp_path / "b", ["-g"])
    rows = run(program)
    bid = file_build_id(program)
    assert bid
    debug = tmp_path / "debug" / ".build-id" / bid[:2] / f"{bid[2:]}.debug"
    debug.parent.mkdir(parents=True)
    subprocess.run(["objcopy", "--only-keep-debug", program, debug], check=True)
    subprocess.run(["strip", "--strip-all", program], check=True)
    got = resolve(rows, resolver=Resolver(debug_roots=(tmp_path / "debug",)),
                  build_ids={m: (bid if m == str(program) else file_build_id(m))
                             for _, m, _, _, _ in rows})  # fmt: skip
    assert [(line, s.quality, s.line) for line, s in got] == [
        (13, LINE, 13),
        (8, LINE, 8),
        (7, LINE, 7),
        (8, LINE, 8),
        (16, LINE, 16),
    ]


def test_rebuilt_after_the_run_is_never_read(tmp_path: Path) -> None:
    """The program edited and rebuilt after the run (its lines moved by one): its build-id
    differs, so its sites fall back to module+offset and say why; the library, not
    rebuilt, still resolves."""
    program = build(tmp_path, ["-g"])
    rows = run(program)
    ids = {m: file_build_id(m) for _, m, _, _, _ in rows}
    resolver = Resolver()
    before = resolve(rows, resolver=resolver, build_ids=ids)
    assert [s.line for _, s in before] == [13, 8, 7, 8, 16]
    build(tmp_path, ["-g"], extra_define="/* an edit */")
    new_id = file_build_id(program)
    assert new_id != ids[str(program)]
    # a fresh resolver and the one that had read the old file both refuse it
    for r in (Resolver(), resolver):
        got = resolve(rows, resolver=r, build_ids=ids)
        for line, site in got:
            if site.offset in {row[2] for row in rows if row[1] == str(program)}:
                assert site.quality == MODULE_OFFSET and site.line is None
                assert site.reason == (
                    f"{program} was rebuilt since the run (build-id "
                    f"{new_id[:12]}…, ran {ids[str(program)][:12]}…)"
                )
            else:
                assert (site.quality, site.line) == (LINE, line)


def test_missing_unreadable_and_no_build_id(tmp_path: Path) -> None:
    program = build(tmp_path, ["-g"])
    rows = run(program)
    offset = rows[0][2]
    bid = file_build_id(program)
    r = Resolver()
    assert r.resolve(str(program), None, [offset]) == [
        Site(
            offset,
            MODULE_OFFSET,
            reason="the module had no build-id when it ran, so no file can be proven to be it",
        )
    ]
    moved = tmp_path / "gone"
    shutil.move(program, moved)
    assert r.resolve(str(program), bid, [offset])[0].reason == f"{program} is not here"
    text = tmp_path / "not-elf"
    text.write_text("hello")
    assert r.resolve(str(text), bid, [offset])[0].reason.startswith(
        f"{text} could not be read as ELF"
    )
    # a program linked without a build-id now, where one ran: never read
    subprocess.run(
        [
            "gcc",
            "-g",
            "-Wl,--build-id=none",
            "-o",
            program,
            HERE / "sites_main.c",
            f"-L{tmp_path}",
            "-lsites",
            "-lrecord",
        ],
        check=True,
    )
    assert r.resolve(str(program), bid, [offset])[0].reason == (
        f"{program} has no build-id now (rebuilt since the run)"
    )


def test_cache_reads_a_module_once_by_file_identity_and_is_bounded(tmp_path: Path) -> None:
    """A module's build-id and symbols are read once per (path, mtime, size, inode) however
    many offsets and calls ask; a file touched or replaced is read again (and checked);
    at most `capacity` indexes are kept, at most `max_units` line tables decoded each."""
    program = build(tmp_path, ["-g"])
    rows = run(program)
    ids = {m: file_build_id(m) for _, m, _, _, _ in rows}
    resolver = Resolver(capacity=1, max_units=1)
    for _ in range(20):  # 100 resolve calls of one offset each
        for line, site in resolve(rows, resolver=resolver, build_ids=ids):
            assert site.line == line
    # two modules alternating in an LRU of one index: rebuilt when the other evicted it,
    # but the build-ids (a key LRU of 8 per index) are read once each
    assert resolver.stats.build_id_reads == 2
    assert resolver.stats.offsets == 100
    steady = Resolver(capacity=4)
    for _ in range(20):
        resolve(rows, resolver=steady, build_ids=ids)
    assert (steady.stats.build_id_reads, steady.stats.index_builds, steady.stats.evictions) == (
        2, 2, 0)  # fmt: skip
    for index in steady._indexes.values():
        assert len(index.lines._tables) <= 1  # one CU per module here
    os.utime(program, ns=(1, 1))  # touched: another file identity, read and checked again
    resolve(rows, resolver=steady, build_ids=ids)
    assert (steady.stats.build_id_reads, steady.stats.index_builds) == (3, 3)
    # replaced by a rebuild: its build-id differs, never read for lines
    build(tmp_path, ["-g"], extra_define="/* edited */")
    got = resolve(rows, resolver=steady, build_ids=ids)
    assert [s.quality for line, s in got if s.offset in (rows[0][2], rows[1][2])] == [
        MODULE_OFFSET, MODULE_OFFSET]  # fmt: skip
    assert resolver.stats.evictions > 0 and len(resolver._indexes) == 1
