"""MPI op ids as Python reads them from the spec: names and traffic categories."""

from __future__ import annotations

import re

import pytest

from contract import CONTRACT_DIR
from stacklens import mpi_ops
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
        "MPI_Init": "other",
        "MPI_Finalize": "other",
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
    assert mpi_ops.op_name(0) == "MPI_Init" and mpi_ops.op_category(0) == "other"


def test_every_op_id_has_a_category():
    categories = mpi_ops.op_categories()
    assert len(categories) == len(mpi_ops.op_names())
    assert set(categories) == set(mpi_ops.CATEGORIES)  # each category is used


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
    assert set(mpi_ops.CLASS_CATEGORY.values()) == set(mpi_ops.CATEGORIES)


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
