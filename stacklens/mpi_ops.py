"""MPI operation ids, names and traffic categories: the Python mirror of the generated
`sl_ops.h`.

Op id n is the n-th entry of `contract/mpi_functions.spec`. The spec is read
with the wrapper generator's own parser, so C and Python can never disagree. An op's
category follows from its spec `class=` (the wrapper body it gets), never from its name.
"""

from __future__ import annotations

from functools import cache

from contract import IO_SPEC, MPI_SPEC, generate
from stacklens.constants import CATEGORIES, MPI_CATEGORIES

# The traffic categories, their labels and subsets are declared once, in
# stacklens.constants.CATEGORY_TABLE; an op's category is one of CATEGORIES.

#: The ops of category mpi_startup that end a rank (the others start it).
SHUTDOWN_OPS = ("MPI_Finalize", "MPI_Abort")
#: Where an op's time goes in a share: its MPI category's index in MPI_CATEGORIES, or one
#: of these after them.
IO_CLASS, STARTUP_CLASS, SHUTDOWN_CLASS = range(len(MPI_CATEGORIES), len(MPI_CATEGORIES) + 3)

#: Category of each spec class (the `class=` key of an entry; see the spec's header).
#: Every class the generator has a wrapper template for must be listed here
#: (tests/test_mpi_ops.py checks it), so a new class cannot go uncategorised.
CLASS_CATEGORY = {
    # point-to-point: posting, completing in the call, matching, persistent requests
    "send": "mpi_p2p",
    "recv": "mpi_p2p",
    "irecv": "mpi_p2p",
    "imrecv": "mpi_p2p",
    "mrecv": "mpi_p2p",
    "mprobe": "mpi_p2p",
    "improbe": "mpi_p2p",
    "sendrecv": "mpi_p2p",
    "sendrecv_replace": "mpi_p2p",
    "send_init": "mpi_p2p",
    "recv_init": "mpi_p2p",
    "start": "mpi_p2p",
    "startall": "mpi_p2p",
    "request_free": "mpi_p2p",
    # completion of requests (point-to-point or not): the time inside is waiting
    "wait": "mpi_completion",
    "waitall": "mpi_completion",
    "waitany": "mpi_completion",
    "waitsome": "mpi_completion",
    "test": "mpi_completion",
    "testall": "mpi_completion",
    "testany": "mpi_completion",
    # collectives, blocking or not
    "coll": "mpi_coll",
    # one-sided
    "rma": "mpi_rma",
    "win_free": "mpi_rma",
    # MPI-IO
    "file_open": "io",
    "file_close": "io",
    "file_read": "io",
    "file_write": "io",
    "file_meta": "io",
    # start-up and the end of the job
    "init": "mpi_startup",
    "finalize": "mpi_startup",
    "abort": "mpi_startup",
    "session_init": "mpi_startup",
    "session_finalize": "mpi_startup",
    "session": "mpi_startup",
    "session_comm": "mpi_startup",
    # the rest: calls counted for their time only
    "plain": "other",
    "comm_free": "other",
    "comm_make": "other",
    "comm_name": "other",
}


@cache
def _entries() -> tuple:
    return tuple(generate.parse_spec(MPI_SPEC))


@cache
def op_names() -> tuple[str, ...]:
    """MPI function names indexed by op id."""
    return tuple(entry.name for entry in _entries())


@cache
def io_function_names() -> tuple[str, ...]:
    """Wrapped libc I/O function names indexed by their call-site id (wire callsite.op_id
    at layers 1 and 2): the entries of contract/io_functions.spec in order."""
    return tuple(entry.name for entry in generate.parse_io_spec(IO_SPEC))


def op_name(op_id: int) -> str:
    """The MPI function name of an op id (raises IndexError for an unknown id)."""
    return op_names()[op_id]


@cache
def op_categories() -> tuple[str, ...]:
    """Traffic category (one of `CATEGORIES`) indexed by op id: the entry's `traffic=` key
    where it has one (RMA synchronisation, probes: class=plain), else its class's.

    Raises ValueError naming the entry if the spec uses a class `CLASS_CATEGORY` lacks or a
    traffic= value that is not a category.
    """
    categories = []
    for entry in _entries():
        if entry.traffic is not None and entry.traffic not in CATEGORIES:
            raise ValueError(
                f"{MPI_SPEC}:{entry.line}: traffic={entry.traffic} of {entry.name} is not one "
                f"of {', '.join(CATEGORIES)}"
            )
        if entry.traffic is None and entry.cls not in CLASS_CATEGORY:
            raise ValueError(
                f"{MPI_SPEC}:{entry.line}: class={entry.cls} of {entry.name} has no traffic "
                "category: add it to stacklens.mpi_ops.CLASS_CATEGORY"
            )
        categories.append(entry.traffic or CLASS_CATEGORY[entry.cls])
    return tuple(categories)


#: What a blocking call waits for (the spec's waits= values), in display order ...
WAITS = generate.WAITS
#: ... and in words.
WAIT_WORDS = {
    "p2p": "blocking point-to-point",
    "coll": "collectives",
    "completion": "waits on requests",
    "rma": "RMA synchronisation",
    "io": "blocking MPI-IO",
}


@cache
def op_waits() -> tuple[str | None, ...]:
    """Indexed by op id: what the op blocks on (one of WAITS: its spec entry's waits= key),
    None for an op that does not wait (non-blocking, Test*, local calls)."""
    return tuple(entry.waits for entry in _entries())


@cache
def ops_waiting(kinds: tuple[str, ...] = WAITS) -> tuple[int, ...]:
    """The ids of the ops that wait for one of `kinds` (default: any)."""
    return tuple(i for i, w in enumerate(op_waits()) if w in kinds)


@cache
def op_receives() -> tuple[bool, ...]:
    """Indexed by op id: whether the op's bytes are bytes it received (a receive, an MPI-IO
    read, an RMA get), from the spec's prototypes: its @buf argument is written by the call
    (a pointer not to const) and it has no @source (Sendrecv_replace counts what it sends).
    Every other op's bytes are bytes it sent or handed to MPI."""
    return tuple(
        any(a.role == "buf" and not a.decl.startswith("const") for a in entry.args)
        and "source" not in entry.roles()
        for entry in _entries()
    )


def op_class(op: str, category: str) -> int:
    """Where the time of an op (name, category) goes in a share: start-up (MPI_Init*),
    shutdown (MPI_Finalize, MPI_Abort), file I/O (MPI-IO calls, category io), else its MPI
    category ("other" for one outside MPI_CATEGORIES)."""
    if category == "mpi_startup":
        return SHUTDOWN_CLASS if op in SHUTDOWN_OPS else STARTUP_CLASS
    if category == "io":
        return IO_CLASS
    return MPI_CATEGORIES.index(category if category in MPI_CATEGORIES else "other")


@cache
def op_classes() -> tuple[int, ...]:
    """op_class indexed by op id."""
    return tuple(op_class(n, c) for n, c in zip(op_names(), op_categories(), strict=True))


def op_category(op_id: int) -> str:
    """The traffic category of an op id (raises IndexError for an unknown id)."""
    return op_categories()[op_id]
