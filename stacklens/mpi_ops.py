"""MPI operation ids and names, read from the MPI function spec (ids are spec line order)."""

# placeholder until the spec lands
OPS = ["MPI_Init", "MPI_Init_thread", "MPI_Finalize", "MPI_Isend"]


def op_name(op_id: int) -> str:
    return OPS[op_id]
