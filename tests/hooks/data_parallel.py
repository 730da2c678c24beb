"""data_parallel.py — an mpi4py data-parallel training loop of known structure (issue #27
point 4): the world (4 ranks, two per host) is split into tensor-parallel pairs inside a
host ("tp": ranks 0-1, 2-3) and data-parallel pairs across hosts ("dp": ranks 0-2, 1-3),
each named with MPI_Comm_set_name; every step allreduces activations in tp (1,024
float64: 8 KiB), gradients in dp (4,096 float32: 16 KiB) and the loss in the world (one
float64).

Used by tests/hooks/test_data_parallel.py under Open MPI and MPICH.
"""

import sys
from array import array

from mpi4py import MPI

#: Training steps.
STEPS = 6


def main() -> int:
    """Split, name, then STEPS steps of three allreduces."""
    world = MPI.COMM_WORLD
    rank = world.Get_rank()
    tp = world.Split(rank // 2, rank)
    tp.Set_name("tp")
    dp = world.Split(rank % 2, rank)
    dp.Set_name("dp")
    act, act_sum = array("d", [1.0]) * 1024, array("d", [0.0]) * 1024
    grad, grad_sum = array("f", [0.5]) * 4096, array("f", [0.0]) * 4096
    loss, loss_sum = array("d", [float(rank)]), array("d", [0.0])
    for _ in range(STEPS):
        tp.Allreduce([act, MPI.DOUBLE], [act_sum, MPI.DOUBLE], op=MPI.SUM)
        dp.Allreduce([grad, MPI.FLOAT], [grad_sum, MPI.FLOAT], op=MPI.SUM)
        world.Allreduce([loss, MPI.DOUBLE], [loss_sum, MPI.DOUBLE], op=MPI.SUM)
    tp.Free()
    dp.Free()
    return 0 if loss_sum[0] == 6.0 else 1


if __name__ == "__main__":
    sys.exit(main())
