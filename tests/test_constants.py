"""The shared names and codes (stacklens/constants.py) agree with the wire format's tables
(contract/stacklens_wire.def), which the C library compiles; the traffic categories are
declared once (constants.CATEGORY_TABLE) and no module writes a list of them of its own."""

from __future__ import annotations

import ast
import typing
from pathlib import Path

from stacklens import api_models, constants, wire
from stacklens.port_counters import PORT_COUNTER_TABLE
from stacklens.settings_table import DECLARED


def _fields(table: str) -> list[str]:
    return [f for f in wire.SPEC.table(table).dtype.names if not f.startswith("pad")]


def test_counter_lists_are_the_wire_tables_fields_in_order():
    assert ["peer", *constants.P2P_COUNTERS] == _fields("p2p")
    io = _fields("io")
    assert io[:2] == ["layer", "phase"]
    assert tuple(io[2 : io.index("path")]) == constants.IO_COUNTERS
    hca = _fields("hca")
    assert tuple(hca[hca.index("node_guid") + 1 :]) == constants.PORT_COUNTERS


def test_port_counters_and_their_kinds_are_the_port_counter_table():
    """contract/port_counters.def is the one table; the pure-data copy here, the error and
    rate lists and every Python reader's map follow it."""
    from collector.fabric import counters, sysfs
    from emulator import ibsim

    assert {c.name: c.kind for c in PORT_COUNTER_TABLE} == constants.PORT_COUNTER_KINDS
    assert constants.ERROR_COUNTERS == (
        "symbol_errors", "link_error_recovery", "link_downed", "rcv_errors", "xmit_discards",
        "vl15_dropped",
    )  # fmt: skip
    assert constants.RATE_COUNTERS == ("xmit_bytes", "rcv_bytes", "xmit_pkts", "rcv_pkts",
                                       "xmit_wait")  # fmt: skip
    assert counters.WORD_COUNTERS == (0, 1)
    assert list(counters.BASIC_WIDTHS) == [32, 32, 32, 32, 32, 16, 8, 8, 16, 16, 16]
    assert list(counters.EXTENDED_WIDTHS) == [64, 64, 64, 64, 32, 16, 8, 8, 16, 16, 16]
    assert sysfs.COUNTER_FILES["port_xmit_data"] == ("xmit_bytes", 4)
    assert sysfs.COUNTER_FILES["VL15_dropped"] == ("vl15_dropped", 1)
    assert len(sysfs.COUNTER_FILES) == len(constants.PORT_COUNTERS)
    assert ibsim.ERROR_FIELDS["xmit_wait"] == "PortXmitWait"
    assert set(ibsim.ERROR_FIELDS) == {"xmit_wait", *constants.ERROR_COUNTERS}
    assert [c.ibsim for c in ibsim.MOVED] == ["PortXmitData", "PortRcvData", "PortXmitPkts",
                                              "PortRcvPkts"]  # fmt: skip


def test_flag_bits_name_counters():
    flags = 0b101 << constants.SATURATED_SHIFT | 1 << 10 + constants.RESET_SHIFT
    assert constants.flagged_counters(flags | constants.FLAG_EXTENDED, 0) == [
        "xmit_bytes",
        "xmit_pkts",
    ]
    assert constants.flagged_counters(flags, constants.RESET_SHIFT) == ["vl15_dropped"]
    assert constants.flagged_counters(0, constants.RESET_SHIFT) == []


def test_size_buckets():
    assert [constants.bucket_bounds(b) for b in (0, 1, 2, 10, 64)] == [
        (0, 1),
        (1, 2),
        (2, 4),
        (512, 1024),
        (2**63, 2**64),
    ]


def test_io_layers_are_the_wire_definitions_io_layers():
    """One table (SL_IO_LAYER in stacklens_wire.def) gives the hooks' enum and STACKLENS_DISABLE
    words; the labels here, the bound and the setting's documentation follow it."""
    layers = wire.SPEC.io_layers
    assert layers == {1: ("POSIX", "POSIX"), 2: ("STDIO", "stdio"), 3: ("MPIIO", "MPI-IO")}
    assert {i: label for i, (_, label) in layers.items()} == constants.IO_LAYERS
    assert wire.BOUNDS["max_io_layer"] == max(layers)
    assert constants.FILE_IO_LAYERS == (1, 2)
    disable = DECLARED["STACKLENS_DISABLE"].meaning
    for name, _ in layers.values():
        assert name.lower() in disable


#: The packages whose modules must read the traffic categories from the table (tests write
#: their expected values out, migrations are history).
READERS = ("stacklens", "stacklens_cli", "collector", "server", "presentation", "frontend",
           "emulator", "bench")  # fmt: skip
ROOT = Path(__file__).resolve().parent.parent


def retyped_categories(source: str) -> list[int]:
    """The lines of `source` with a tuple, list or set of two or more category keys, or a
    dict keyed by them: a copy of (part of) the table that can drift from it. A `Literal`
    is the type checker's copy, compared with the table apart."""
    keys = set(constants.CATEGORIES)
    literal = set()
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Subscript) and getattr(node.value, "id", "") == "Literal":
            literal.add(id(node.slice))
        elif (
            isinstance(node, ast.Tuple | ast.List | ast.Set | ast.Dict) and id(node) not in literal
        ):
            items = node.keys if isinstance(node, ast.Dict) else node.elts
            named = [i for i in items if isinstance(i, ast.Constant) and i.value in keys]
            if len(named) >= 2:
                lines.append(node.lineno)
    return lines


def test_the_check_finds_a_retyped_list_of_categories():
    assert retyped_categories('MOVING = ("mpi_p2p", "mpi_coll")\nx = ["io"]') == [1]
    assert retyped_categories('LABELS = {"mpi_rma": "RMA", "io": "MPI-IO"}') == [1]
    assert retyped_categories('if c in {"io", "mpi_startup"}: pass') == [1]
    assert retyped_categories('T = Literal["mpi_p2p", "io"]') == []


def test_traffic_categories_are_declared_once():
    """Every reader takes the keys, labels and subsets from constants.CATEGORY_TABLE."""
    found = {}
    for package in READERS:
        for path in sorted((ROOT / package).rglob("*.py")):
            name = str(path.relative_to(ROOT))
            if name != "stacklens/constants.py" and (lines := retyped_categories(path.read_text())):
                found[name] = lines
    assert found == {}


def test_category_subsets_and_labels():
    assert constants.CATEGORIES == ("mpi_p2p", "mpi_completion", "mpi_coll", "mpi_rma", "io",
                                    "mpi_startup", "other")  # fmt: skip
    # stored: the rollups' share classes index this order (schema.SHARE_CLASSES)
    assert constants.MPI_CATEGORIES == ("mpi_p2p", "mpi_completion", "mpi_coll", "mpi_rma",
                                        "other")  # fmt: skip
    assert constants.COMMUNICATION == ("mpi_p2p", "mpi_completion", "mpi_coll", "mpi_rma", "io",
                                       "other")  # fmt: skip
    assert constants.MOVING == ("mpi_p2p", "mpi_coll", "mpi_rma")
    assert constants.ON_LINKS == ("mpi_p2p", "mpi_coll", "mpi_rma", "io")
    # one label per category, the same on the pages and in the reports
    assert constants.CATEGORY_LABELS == {
        "mpi_p2p": "point-to-point",
        "mpi_completion": "wait/test",
        "mpi_coll": "collective",
        "mpi_rma": "RMA",
        "io": "file I/O",
        "mpi_startup": "start-up (MPI_Init, MPI_Finalize, MPI_Abort)",
        "other": "other",
    }
    # the API's type of an attributed figure's category is the table's subset
    assert typing.get_args(api_models.TrafficCategory) == constants.ON_LINKS
