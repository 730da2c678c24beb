"""A family's label (server/families/model.labels), pure: the descriptions a 32-rank program
would send (a 4×8 Cartesian grid and its rows, a split into 4 groups of 8, a node-local
split_type, a dup of the world and of that dup, a graph, a named communicator), labelled
with the call sites the service resolves. The real programs' labels under Open MPI and
MPICH are checked in tests/hooks/test_families.py and tests/hooks/test_suite.py."""

from __future__ import annotations

from dataclasses import replace

from server.families.model import Description, build, labels

PROGRAM = "/apps/solver"
WORLD_ID = 1


def made(comm: int, family: int, how: int, members: list[int], parent: int = WORLD_ID,
         grid: str = "", kept: int = 0, offset: int = 0, name: str = ""
         ) -> list[Description]:  # fmt: skip
    """The descriptions every member of one communicator sends (world ranks `members`)."""
    module = PROGRAM if offset else ""
    n = len(members)
    color = 1 if how == 3 else 0  # a split_type's type: shared
    return [Description(1, rank, comm, parent, family, how, n, i, color, 0, kept, grid, module,
                        offset, name) for i, rank in enumerate(members)]  # fmt: skip


def program() -> list[Description]:
    """The program's communicators (made codes of contract/stacklens_wire.def)."""
    out = made(WORLD_ID, 0, 1, list(range(32)), parent=0)
    out += made(2, 20, 4, list(range(32)), grid="4x8", offset=0x1100)  # cart_create
    for row in range(4):  # cart_sub keeping dimension 1: 4 rows of 8
        out += made(10 + row, 30, 5, list(range(8 * row, 8 * row + 8)), 2, "4x8", 0b10, 0x1200)
    for color in range(4):  # split: 4 groups of 8 (every 4th rank)
        out += made(20 + color, 40, 2, list(range(color, 32, 4)), offset=0x1300)
    for host in range(2):  # split_type: 2 groups of 16
        out += made(30 + host, 50, 3, list(range(16 * host, 16 * host + 16)), offset=0x1400)
    out += made(40, 60, 8, list(range(32)), offset=0x1500)  # dup of the world
    out += made(41, 61, 8, list(range(32)), parent=40, offset=0x1600)  # dup of that dup
    out += made(42, 70, 11, list(range(32)), offset=0x1700)  # graph
    out += made(43, 80, 8, list(range(32)), offset=0x1800, name="tp")  # a named dup
    out += made(44, 90, 6, [0, 1, 2], offset=0x1900)  # create: one group of 3
    return out


#: The sites as the service resolves them (file:line, else function+offset).
WHERE = {"call:0x00000028": "solver.c:88", "call:0x00000032": "x.c:12",
         "call:0x00000046": "x.c:40", "call:0x0000005a": "main+0x4c"}  # fmt: skip


def test_each_family_is_labelled_as_a_person_reads_it():
    families, _ = build(program())
    assert labels(families, WHERE) == {
        "world": "world",
        "call:0x00000014": "cart 4×8",
        "call:0x0000001e": "cart 4×8 dim 1 kept",
        "call:0x00000028": "split at solver.c:88, 4 groups of 8",
        "call:0x00000032": "split_type shared at x.c:12, 2 groups of 16",
        "call:0x0000003c": "dup of world",
        "call:0x0000003d": "dup of dup of world",
        "call:0x00000046": "graph at x.c:40",
        "name:tp": "tp",
        "call:0x0000005a": "create at main+0x4c, 1 group of 3",
    }


def test_unresolved_or_unknown_sites_and_other_grids():
    out = made(WORLD_ID, 0, 1, list(range(6)), parent=0)
    out += made(2, 20, 4, list(range(6)), grid="1x2x3")
    # cart_sub keeping dimensions 0 and 2 of 1x2x3: 2 groups of 3
    out += made(5, 30, 5, [0, 1, 2], 2, "1x2x3", 0b101)
    out += made(6, 30, 5, [3, 4, 5], 2, "1x2x3", 0b101)
    # cart_sub keeping no dimension: 6 groups of 1
    out += [d for r in range(6) for d in made(10 + r, 31, 5, [r], 2, "1x2x3", 0)]
    # split at an unresolved site; uneven groups; no site at all
    out += made(20, 40, 2, [0, 1], offset=0x20) + made(21, 40, 2, [2, 3, 4, 5], offset=0x20)
    out += made(22, 41, 2, [0, 1, 2, 3, 4, 5])
    # split_type of a type the library numbers itself (colour 0): no type name
    out += [replace(d, color=0) for d in made(30, 50, 3, [0, 1, 2, 3, 4, 5], offset=0x40)]
    families, _ = build(out)
    assert labels(families, {"call:0x00000028": "solver+0x20"}) == {
        "world": "world",
        "call:0x00000014": "cart 1×2×3",
        "call:0x0000001e": "cart 1×2×3 dims 0,2 kept",
        "call:0x0000001f": "cart 1×2×3 no dim kept",
        "call:0x00000028": "split at solver+0x20, 2 groups of 2 to 4",
        "call:0x00000029": "split, 1 group of 6",
        "call:0x00000032": "split_type, 1 group of 6",
    }
