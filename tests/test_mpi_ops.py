"""MPI op ids as Python reads them from the spec: names and traffic categories."""

from __future__ import annotations

import re

import pytest

from contract import CONTRACT_DIR
from stacklens import mpi_ops
from stacklens.constants import CATEGORIES
from stacklens.paths import HOOKS_DIR
from tests.collector.test_ingest import exchange, frame
from tests.conftest import query


def _category(name: str) -> str:
    return mpi_ops.op_category(mpi_ops.op_names().index(name))


def test_known_functions_have_their_category():
    expected = {
        "MPI_Send": "mpi_p2p",
        "MPI_Irecv": "mpi_p2p",
        "MPI_Sendrecv": "mpi_p2p",
        "MPI_Start": "mpi_p2p",
        "MPI_Request_free": "mpi_p2p",
        "MPI_Wait": "mpi_completion",
        "MPI_Waitall": "mpi_completion",
        "MPI_Testany": "mpi_completion",
        "MPI_Allreduce": "mpi_coll",
        "MPI_Ibcast": "mpi_coll",
        "MPI_Put": "mpi_rma",
        "MPI_Win_free": "mpi_rma",
        "MPI_File_open": "io",
        "MPI_File_write_at_all": "io",
        "MPI_File_read_c": "io",
        "MPI_Init": "mpi_startup",
        "MPI_Finalize": "mpi_startup",
        "MPI_Abort": "mpi_startup",
        "MPI_Comm_split": "other",  # class=plain
        "MPI_Comm_free": "other",
        # class=plain with a traffic= key
        "MPI_Win_fence": "mpi_rma",
        "MPI_Win_flush_local_all": "mpi_rma",
        "MPI_Win_allocate_c": "mpi_rma",
        "MPI_Probe": "mpi_p2p",
        "MPI_Iprobe": "mpi_p2p",
    }
    assert {name: _category(name) for name in expected} == expected
    assert mpi_ops.op_name(0) == "MPI_Init" and mpi_ops.op_category(0) == "mpi_startup"


def test_every_op_id_has_a_category():
    categories = mpi_ops.op_categories()
    assert len(categories) == len(mpi_ops.op_names())
    assert set(categories) == set(CATEGORIES)  # each category is used


def test_a_traffic_key_that_is_no_category_is_refused(tmp_path, monkeypatch):
    spec = tmp_path / "bad.spec"
    spec.write_text("int MPI_Barrier(MPI_Comm comm @comm) class=plain traffic=mpi_barrier\n")
    monkeypatch.setattr(mpi_ops, "MPI_SPEC", spec)
    for cached in (mpi_ops._entries, mpi_ops.op_categories):
        cached.cache_clear()
    try:
        with pytest.raises(ValueError, match="bad.spec:1: traffic=mpi_barrier of MPI_Barrier"):
            mpi_ops.op_categories()
    finally:
        for cached in (mpi_ops._entries, mpi_ops.op_categories):
            cached.cache_clear()


def test_every_wrapper_class_has_a_category():
    """A class with a wrapper template is one the spec may use: it needs a category."""
    templates = (CONTRACT_DIR / "templates").glob("wrapper_*.c.in")
    classes = {p.name.removeprefix("wrapper_").removesuffix(".c.in") for p in templates}
    assert classes == set(mpi_ops.CLASS_CATEGORY)
    assert set(mpi_ops.CLASS_CATEGORY.values()) == set(CATEGORIES)


@pytest.mark.parametrize("build", ["build", "build-mpich"])
def test_the_built_hook_library_numbers_ops_in_spec_order(build):
    """The op ids the C library sends (its generated sl_ops.h) are the spec's order, which
    Python reads: a stale build or a reordered spec shows here."""
    header = (HOOKS_DIR / build / "sl_ops.h").read_text()
    enum = re.search(r"enum sl_op \{(.*?)\};", header, re.S)
    assert enum is not None
    ids = re.findall(r"SL_OP_(\w+) = (\d+),", enum[1])
    assert [name for name, _ in ids] == list(mpi_ops.op_names())
    assert [int(i) for _, i in ids] == list(range(len(ids)))


def test_the_collector_stores_the_spec_op_names_by_id(collector, pg_url):
    """mpi_ops, which readers join op ids to, is the spec's list in order."""
    exchange(collector.address, frame(0), acks=1)  # the writer syncs mpi_ops on connecting
    assert [name for (name,) in query(pg_url, "SELECT name FROM mpi_ops ORDER BY id")] == list(
        mpi_ops.op_names()
    )


def test_what_each_blocking_call_waits_for_comes_from_the_spec():
    """waits= (contract/mpi_functions.spec): blocking point-to-point, collectives,
    completion, RMA synchronisation and MPI-IO wait; the calls that post a request, Test*
    and local calls do not; the generator refuses waits= on a call that makes a request."""
    waits = dict(zip(mpi_ops.op_names(), mpi_ops.op_waits(), strict=True))
    expected = {
        "MPI_Send": "p2p", "MPI_Recv": "p2p", "MPI_Sendrecv": "p2p", "MPI_Probe": "p2p",
        "MPI_Mprobe": "p2p", "MPI_Sendrecv_replace_c": "p2p", "MPI_Wait": "completion",
        "MPI_Waitall": "completion", "MPI_Allreduce": "coll", "MPI_Barrier": "coll",
        "MPI_Comm_split": "coll", "MPI_Win_free": "coll", "MPI_Win_fence": "rma",
        "MPI_Win_unlock": "rma", "MPI_Win_flush": "rma", "MPI_Win_wait": "rma",
        "MPI_File_write_at_all": "io", "MPI_File_open": "io",
        "MPI_Isend": None, "MPI_Irecv": None, "MPI_Bsend": None, "MPI_Iprobe": None,
        "MPI_Test": None, "MPI_Testsome": None, "MPI_Ibcast": None, "MPI_Send_init": None,
        "MPI_Put": None, "MPI_Win_post": None, "MPI_File_iwrite": None, "MPI_Start": None,
        "MPI_Init": None, "MPI_Finalize": None, "MPI_Comm_group": None,
    }  # fmt: skip
    assert {name: waits[name] for name in expected} == expected
    # every blocking collective waits, every request-making call does not
    from contract import MPI_SPEC, generate

    for entry in generate.parse_spec(MPI_SPEC):
        makes_request = {"request", "requests"} & set(entry.roles())
        if entry.cls == "coll":
            assert (entry.waits == "coll") == (not makes_request), entry.name
        if makes_request and entry.cls not in generate.COMPLETION_CLASSES:
            assert entry.waits is None, entry.name
    line = "int MPI_Isend(const void *buf @buf, MPI_Request *request @request) class=send waits=p2p"
    with pytest.raises(generate.SpecError, match="does not wait"):
        generate.parse_entry(line, 0, 1, "spec:1")
    with pytest.raises(generate.SpecError, match="waits= wants one of"):
        generate.parse_entry("int MPI_Barrier(MPI_Comm comm @comm) class=coll waits=x", 0, 1, "s")
    assert mpi_ops.ops_waiting(("p2p",)) == tuple(
        i for i, w in enumerate(mpi_ops.op_waits()) if w == "p2p"
    )
