/*
 * neighbor_graph.c — the neighbourhood collectives on a distributed graph where each
 * rank sends to the next one only (one out-neighbour), blocking and non-blocking
 * (completed by MPI_Wait); see suite.h for what it prints and neighbor.c for the
 * Cartesian grid. Payload bytes: the send count x type for the one out-neighbour.
 */
#include "suite.h"

static int rank, size;

int main(int argc, char **argv)
{
    suite_init(&argc, &argv, &rank, &size);
    MPI_Comm g;
    int to = (rank + 1) % size, from = (rank + size - 1) % size, weight = 1;
    MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 1, &from, &weight, 1, &to, &weight,
                                   MPI_INFO_NULL, 0, &g);
    suite_count("MPI_Dist_graph_create_adjacent", 0);
    int s[4] = { rank, rank, rank, rank }, r[4] = { -1, -1, -1, -1 };
    MPI_Neighbor_alltoall(s, 4, MPI_INT, r, 4, MPI_INT, g);
    suite_count("MPI_Neighbor_alltoall", 16);
    suite_check(r[3] == from, "neighbor_alltoall");
    MPI_Neighbor_allgather(s, 2, MPI_INT, r, 2, MPI_INT, g);
    suite_count("MPI_Neighbor_allgather", 8);
    suite_check(r[1] == from, "neighbor_allgather");
    MPI_Request req;
    MPI_Ineighbor_alltoall(s, 3, MPI_INT, r, 3, MPI_INT, g, &req);
    suite_count("MPI_Ineighbor_alltoall", 12);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    suite_count("MPI_Wait", 0);
    suite_check(r[2] == from, "ineighbor_alltoall");
    MPI_Comm_free(&g);
    suite_count("MPI_Comm_free", 0);
    return suite_end();
}
