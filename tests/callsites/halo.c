/* tests/callsites/halo.c — a shared library making MPI calls from a known line. */
#include <mpi.h>

__attribute__((noinline)) void exchange(int n)
{
    int rank, size, token = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int i = 0; i < n; i++) {
        MPI_Sendrecv_replace(&token, 1, MPI_INT, (rank + 1) % size, 0, (rank + size - 1) % size, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE); /* site:halo */
        token += i;
    }
}
