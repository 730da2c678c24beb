"""Communicator families from the hooks' descriptions, and their traffic. Pure: plain data in,
plain data out.

A family is the communicators one creating call made (one family id, the same on every
member) or, when the program named them, every communicator of one name (the name wins).
MPI_COMM_WORLD is the family "world". Traffic is given to the family of its communicator:
collectives (coll rows, by communicator id), point-to-point on other communicators
(comm_p2p rows) and the world's own point-to-point (the p2p table's minus the others').
Communicators without a description (beyond the hooks' bound, or made by the MPI library
itself) and the hooks' overflow records are the family "not described".
"""

from __future__ import annotations

import os
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

#: How a communicator was made: the wire's comm.made codes (contract/stacklens_wire.def).
MADE = {1: "world", 2: "split", 3: "split_type", 4: "cart_create", 5: "cart_sub",
        6: "create", 7: "create_group", 8: "dup", 9: "intercomm_create",
        10: "intercomm_merge", 11: "graph", 12: "from_group"}  # fmt: skip
#: A split_type's type: the wire's comm.color codes of a split_type (the hooks' own numbering;
#: 0, another type, the MPI library's own, has no name).
SPLIT_TYPES = {1: "shared", 2: "hw_guided", 3: "hw_unguided"}
#: Where a transfer's bytes go: inside one host, over one leaf switch, over more switches
#: (the spine), or between hosts the fabric does not place (no fabric, or no route).
REACHES = ("host", "leaf", "spine", "unplaced")
#: The family of MPI_COMM_WORLD, and of the traffic no description explains.
WORLD, NOT_DESCRIBED = "world", "not described"
#: Groups of a family listed with their members (the rest are counted).
MAX_GROUPS = 64


@dataclass(frozen=True)
class Description:
    """One rank's description of one communicator (a comm_made row, the latest)."""

    run: int
    rank: int
    comm_id: int
    parent_id: int
    family_id: int
    made: int
    size: int
    comm_rank: int
    color: int
    key: int
    kept: int
    grid: str
    module: str
    offset: int
    name: str


@dataclass
class Family:
    """One family: how it was made, its groups (communicator id -> world rank by rank in
    it), its ops ((op name, kind) -> [calls, bytes, time_ns]) and its transfers' bytes by
    (reach, provenance). `module` and `offset` are its call site as the hooks saw it (the
    offset from the module's load bias, as a call site's frame), `run` the run that
    described it;
    `parent` is the family of the communicator it was made from."""

    key: str
    made: str
    name: str = ""
    grid: str = ""
    kept: list[int] = field(default_factory=list)
    module: str = ""
    offset: int = 0
    run: int = 0
    parent: str = ""
    groups: dict[tuple[int, int], dict[int, int]] = field(default_factory=dict)
    colors: set[int] = field(default_factory=set)
    ops: dict[tuple[str, str], list[int]] = field(default_factory=dict)
    reach: dict[tuple[str, str], int] = field(default_factory=dict)

    def add_op(self, op: str, kind: str, calls: int, nbytes: int, time_ns: int) -> None:
        row = self.ops.setdefault((op, kind), [0, 0, 0])
        row[0] += calls
        row[1] += nbytes
        row[2] += time_ns

    @property
    def site(self) -> str:
        """Its call site as module + offset ("" if unknown)."""
        return site_text(self.module, self.offset)


def site_text(module: str, offset: int) -> str:
    """A call site as module + offset, unresolved (the API's `site`)."""
    return f"{os.path.basename(module)}+{offset:#x}" if module and offset else ""


def shape(fam: Family) -> str:
    """How many communicators a family has and of how many ranks: "4 groups of 8",
    "1 group of 3", "3 groups of 2 to 4"."""
    sizes = sorted({len(g) for g in fam.groups.values()})
    n = len(fam.groups)
    of = f"{sizes[0]}" if len(sizes) == 1 else f"{sizes[0]} to {sizes[-1]}" if sizes else "0"
    return f"{n} group{'s' * (n != 1)} of {of}"


def grid_text(grid: str) -> str:
    """A Cartesian grid as a person writes it: "2x4" -> "2×4"."""
    return grid.replace("x", "×")


def label(fam: Family, where: str, parent: str) -> str:
    """How a person reads a family: its MPI_Comm_set_name name (the name wins), else how it
    was made, where (`where`: its call site resolved as the call-site table resolves it,
    file:line, else function+offset, else module+offset; "" if unknown) and its shape;
    `parent` is the label of the family it was made from (for a dup). Examples: "world",
    "split at solver.c:88, 4 groups of 8", "split_type shared at x.c:12, 2 groups of 4",
    "cart 4×8", "cart 4×8 dim 1 kept",
    "dup of world", "graph at x.c:40"."""
    if fam.name:
        return fam.name
    if fam.key in (WORLD, NOT_DESCRIBED):
        return fam.key
    at = f" at {where}" if where else ""
    if fam.made == "cart_create":
        return f"cart {grid_text(fam.grid)}" if fam.grid else f"cart{at}"
    if fam.made == "cart_sub":
        dims = ",".join(str(d) for d in fam.kept)
        kept = f"dim{'s' * (len(fam.kept) > 1)} {dims} kept" if fam.kept else "no dim kept"
        return f"cart {grid_text(fam.grid)} {kept}" if fam.grid else f"cart_sub{at}, {kept}"
    if fam.made == "dup":
        return f"dup of {parent}" if parent else f"dup{at}"
    if fam.made == "graph":
        return f"graph{at}"
    if fam.made == "split_type":
        types = sorted({SPLIT_TYPES[c] for c in fam.colors if c in SPLIT_TYPES})
        kind = f" {'/'.join(types)}" if types else ""
        return f"split_type{kind}{at}, {shape(fam)}"
    return f"{fam.made}{at}, {shape(fam)}"


def labels(families: dict[str, Family], where: dict[str, str]) -> dict[str, str]:
    """Every family's `label`, by key; `where` gives a family's call site in short (see
    `label`), a dup's parent is labelled first (a family made from itself is not)."""
    out: dict[str, str] = {}

    def of(key: str, depth: int) -> str:
        if key not in out:
            fam = families[key]
            up = fam.parent in families and fam.parent != key and depth < len(families)
            out[key] = label(fam, where.get(key, ""), of(fam.parent, depth + 1) if up else "")
        return out[key]

    for key in families:
        of(key, 0)
    return out


def family_key(d: Description) -> str:
    """The family a description belongs to: its name, world, or its creating call."""
    if d.name:
        return f"name:{d.name}"
    if d.made == 1:
        return WORLD
    return f"call:{d.family_id:#010x}"


def build(descriptions: list[Description]) -> tuple[dict[str, Family], dict[tuple[int, int], str]]:
    """The families of the descriptions, and (run, communicator id) -> family key. A
    group's members are its world ranks by rank in it; an inter-communicator's (the
    descriptions of both its groups give the same ranks in it) both groups' world ranks
    ascending, so its collectives are not modelled (their size is a group's, not the
    members')."""
    families: dict[str, Family] = {}
    of: dict[tuple[int, int], str] = {}
    members: dict[tuple[int, int], list[tuple[int, int]]] = defaultdict(list)
    for d in sorted(descriptions, key=lambda d: (d.run, d.comm_id, d.rank)):
        key = family_key(d)
        fam = families.get(key)
        if fam is None:
            fam = families[key] = Family(
                key, MADE.get(d.made, "unknown"), d.name, d.grid,
                [i for i in range(32) if d.kept >> i & 1], d.module, d.offset, d.run,
            )  # fmt: skip
        members[(d.run, d.comm_id)].append((d.comm_rank, d.rank))
        if d.made in (2, 3):
            fam.colors.add(d.color)
        of[(d.run, d.comm_id)] = key
    for comm, pairs in members.items():
        # an inter-communicator's two groups both number their ranks from 0: a rank in it
        # said twice; its members are then both groups' world ranks, ascending
        inter = len({r for r, _ in pairs}) < len(pairs)
        families[of[comm]].groups[comm] = {w: w for _, w in pairs} if inter else dict(pairs)
    for d in descriptions:
        fam = families[of[(d.run, d.comm_id)]]
        if not fam.parent and d.made != 1:
            fam.parent = of.get((d.run, d.parent_id), "")
    return families, of


@dataclass(frozen=True)
class Send:
    """`nbytes` one world rank sent another in one run, for one family, and how known."""

    run: int
    src: int
    dst: int
    family: str
    provenance: str  # routed (measured point-to-point) | modelled (a collective's model)
    nbytes: int


def describe(fam: Family, text: str) -> dict[str, Any]:
    """A family as the API lists it (stacklens.api_models.CommFamily) with its label
    `text`, without traffic."""
    groups = sorted(fam.groups.items())
    return {
        "family": fam.key,
        "label": text,
        "made": fam.made,
        "name": fam.name or None,
        "grid": fam.grid or None,
        "kept_dims": fam.kept,
        "site": fam.site or None,
        "groups_total": len(groups),
        "groups": [
            {"run": run, "comm_id": comm, "members": [m[r] for r in sorted(m)]}
            for (run, comm), m in groups[:MAX_GROUPS]
        ],
    }


def reach_of(src_host: str | None, dst_host: str | None, hops: int | None) -> str:
    """The reach of a transfer between two hosts: `hops` is the number of links its route
    crosses (None: no route or not placed)."""
    if src_host is not None and src_host == dst_host:
        return "host"
    if hops is None:
        return "unplaced"
    return "leaf" if hops <= 2 else "spine"


def totals(fam: Family) -> dict[str, Any]:
    """A family's traffic: ops heaviest time first, bytes, time and reach by provenance."""
    ranked = sorted(((op, kind, v) for (op, kind), v in fam.ops.items() if any(v)),
                    key=lambda e: (-e[2][2], -e[2][1], e[0]))  # fmt: skip
    ops = [
        {"op": op, "kind": kind, "calls": v[0], "bytes": v[1], "time_ns": v[2]}
        for op, kind, v in ranked
    ]
    reach: dict[str, dict[str, int]] = defaultdict(dict)
    for (where, provenance), nbytes in fam.reach.items():
        reach[where][provenance] = nbytes
    return {
        "ops": ops,
        "bytes": sum(o["bytes"] for o in ops),
        "time_ns": sum(o["time_ns"] for o in ops),
        "reach": [
            {"reach": where, "provenance": prov, "bytes": reach[where][prov]}
            for where in REACHES
            for prov in sorted(reach.get(where, {}))
        ],
    }
