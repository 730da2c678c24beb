"""Runs: every launch inside a job is a run of its own (wire format version 2).

A job (scheduler id or STACKLENS_JOB_ID) has runs: `runs` holds one row per (job, wire run
id) with its ordinal in the job (1, 2, ... in first-seen order), kind (mpi: one mpirun /
srun step, every rank sharing the run id its rank 0 drew; processes: the job's one run of
processes without MPI, wire run id 0), label (SLURM_STEP_ID), size, command, user and
status. `run_processes` numbers the processes of a `processes` run by their key (host,
pid, start time): that number is their rank. Every delta table, `ranks`, the frame ledger
and the rollups gain `run_id` (runs.id); the ledger's key becomes (job, run, rank, seq), so
a second launch with the same job id is no longer taken for resends of the first.

Existing jobs each get one run (ordinal 1, kind mpi, wire run id -1: version 1 frames had
none, and are refused from now on), holding all their rows.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

#: (table, view, [array fields]) of the array-layout tables (migrations 0002, 0005).
ARRAY_TABLES = (
    ("p2p_frames", "p2p_deltas", ("peer", "bytes_sent", "msgs_sent", "bytes_recv", "msgs_recv")),
    ("op_frames", "op_deltas", ("op_id", "calls", "bytes", "time_ns")),
    ("op_hist_frames", "op_hist_deltas", ("op_id", "bucket", "count")),
    ("coll_frames", "coll_deltas",
     ("op_id", "comm_id", "comm_size", "root", "calls", "bytes", "time_ns")),
    ("rma_frames", "rma_deltas", ("target", "op_id", "calls", "bytes")),
)  # fmt: skip
ROW_TABLES = ("io_deltas", "hca_records")
#: HCA counters in the bit order of `valid` (migration 0004).
HCA_COUNTERS = (
    "xmit_bytes", "rcv_bytes", "xmit_pkts", "rcv_pkts", "xmit_wait", "symbol_errors",
    "link_error_recovery", "link_downed", "rcv_errors", "xmit_discards", "vl15_dropped",
)  # fmt: skip
#: Tables keyed by run from now on: (table, old primary key, new primary key). A run
#: belongs to one job: job_id stays in the per-rank keys only so that they hold the column
#: a Citus cluster distributes them by (docs/scale-out.md).
KEYED = (
    ("ranks", ("job_id", "world_rank"), ("job_id", "run_id", "world_rank")),
    ("received_frames", ("job_id", "world_rank", "seq"),
     ("job_id", "run_id", "world_rank", "seq")),
    ("rollup_dirty", ("job_id", "minute_ns"), ("run_id", "minute_ns")),
    ("p2p_minutes", ("job_id", "minute_ns", "world_rank", "peer"),
     ("run_id", "minute_ns", "world_rank", "peer")),
)  # fmt: skip


def _views(with_run: bool) -> None:
    """Create the per-record views over the array tables and hca_records."""
    head = "f.job_id, f.run_id, f.world_rank" if with_run else "f.job_id, f.world_rank"
    for table, view, fields in ARRAY_TABLES:
        arrays = ", ".join(f"f.{name}" for name in fields)
        op.execute(
            f"CREATE VIEW {view} AS SELECT {head}, f.t_start_ns, f.t_end_ns, u.* FROM {table} f "
            f"CROSS JOIN LATERAL unnest({arrays}) AS u({', '.join(fields)})"
        )
    known = ", ".join(
        f"CASE WHEN f.valid & {1 << i} <> 0 THEN f.{name} END AS {name}"
        for i, name in enumerate(HCA_COUNTERS)
    )
    op.execute(
        f"CREATE VIEW hca_deltas AS SELECT {head}, f.t_start_ns, f.t_end_ns, f.device, f.port, "
        f"f.node_guid, {known} FROM hca_records f"
    )


def _drop_views() -> None:
    for _, view, _ in ARRAY_TABLES:
        op.execute(f"DROP VIEW {view}")
    op.execute("DROP VIEW hca_deltas")


def upgrade() -> None:
    op.create_table(
        "runs",
        sa.Column("id", sa.BigInteger(), sa.Identity(), primary_key=True),
        sa.Column(
            "job_id", sa.BigInteger(), sa.ForeignKey("jobs.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("run_key", sa.BigInteger(), nullable=False),
        sa.Column("ordinal", sa.Integer(), nullable=False),
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("label", sa.Text(), nullable=True),
        sa.Column("world_size", sa.Integer(), nullable=False),
        sa.Column("command", sa.Text(), nullable=True),
        sa.Column("user", sa.Text(), nullable=True),
        sa.Column("status", sa.Text(), nullable=False),
        sa.Column("started_ns", sa.BigInteger(), nullable=False),
        sa.Column("last_seen_ns", sa.BigInteger(), nullable=False),
        sa.Column("finished_ns", sa.BigInteger(), nullable=True),
        sa.UniqueConstraint("job_id", "run_key", name="uq_runs_job_run_key"),
        sa.UniqueConstraint("job_id", "ordinal", name="uq_runs_job_ordinal"),
    )
    op.create_table(
        "run_processes",
        sa.Column(
            "run_id",
            sa.BigInteger(),
            sa.ForeignKey("runs.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("process", sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column("host", sa.Text(), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("proc_start_ns", sa.BigInteger(), nullable=False),
        sa.UniqueConstraint("run_id", "host", "pid", "proc_start_ns", name="uq_run_processes_key"),
    )
    op.execute(
        'INSERT INTO runs (job_id, run_key, ordinal, kind, world_size, command, "user", status, '
        "started_ns, last_seen_ns, finished_ns) SELECT id, -1, 1, 'mpi', world_size, command, "
        '"user", status, started_ns, last_seen_ns, finished_ns FROM jobs'
    )
    _drop_views()
    for table in [t for t, _, _ in ARRAY_TABLES] + list(ROW_TABLES):
        op.add_column(table, sa.Column("run_id", sa.BigInteger(), nullable=True))
        op.execute(f"UPDATE {table} t SET run_id = r.id FROM runs r WHERE r.job_id = t.job_id")
        op.alter_column(table, "run_id", nullable=False)
    _views(with_run=True)
    for table, _, key in KEYED:
        op.add_column(table, sa.Column("run_id", sa.BigInteger(), nullable=True))
        op.execute(f"UPDATE {table} t SET run_id = r.id FROM runs r WHERE r.job_id = t.job_id")
        op.execute(f"DELETE FROM {table} WHERE run_id IS NULL")  # rows of deleted jobs
        op.alter_column(table, "run_id", nullable=False)
        op.drop_constraint(f"{table}_pkey", table, type_="primary")
        op.create_primary_key(f"{table}_pkey", table, list(key))
    op.create_foreign_key(
        "ranks_run_id_fkey", "ranks", "runs", ["run_id"], ["id"], ondelete="CASCADE"
    )


def downgrade() -> None:
    first = "SELECT id FROM runs WHERE ordinal = 1"
    op.drop_constraint("ranks_run_id_fkey", "ranks", type_="foreignkey")
    for table, key, _ in KEYED:
        op.execute(f"DELETE FROM {table} WHERE run_id NOT IN ({first})")
        op.drop_constraint(f"{table}_pkey", table, type_="primary")
        op.drop_column(table, "run_id")
        op.create_primary_key(f"{table}_pkey", table, list(key))
    _drop_views()
    for table in [t for t, _, _ in ARRAY_TABLES] + list(ROW_TABLES):
        op.execute(f"DELETE FROM {table} WHERE run_id NOT IN ({first})")
        op.drop_column(table, "run_id")
    _views(with_run=False)
    op.drop_table("run_processes")
    op.drop_table("runs")
