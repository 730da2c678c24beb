/*
 * neighbor_graph.c — the neighbourhood collectives on the three kinds of graph
 * communicator, each made by its own call (so each is a family of its own, made "graph"):
 *   adjacent  MPI_Dist_graph_create_adjacent, each rank sends to the next one only (one
 *             out-neighbour): alltoall, allgather, ineighbor_alltoall (+ MPI_Wait);
 *   graph     MPI_Graph_create, an undirected ring (neighbours: the next rank, then the
 *             previous one): allgather, ineighbor_allgather (+ MPI_Wait);
 *   dist      MPI_Dist_graph_create, every rank gives its one edge, to the next rank:
 *             alltoall, neighbor_allgatherv.
 * The three are freed at the end only: a freed communicator gives its id back to the next
 * one of the same group (mpi_pmpi_hooks/src/handles.h), which would then take over its
 * description. See suite.h for what it prints and neighbor.c for the Cartesian grid.
 * Payload bytes: the
 * send count x type for each out-neighbour. Run on 3 ranks or more (a ring of 2 has one
 * neighbour twice).
 */
#include "suite.h"

static int rank, size;

/* The adjacent distributed graph: a ring to the next rank. */
static MPI_Comm adjacent(int from, int to)
{
    MPI_Comm g;
    int weight = 1;
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
    return g;
}

/* The graph topology: an undirected ring, every rank's neighbours the next and the
 * previous rank (index and edges of the whole graph on every rank). */
static MPI_Comm graph(int from, int to)
{
    int index[size], edges[2 * size];
    for (int i = 0; i < size; i++) {
        index[i] = 2 * (i + 1);
        edges[2 * i] = (i + 1) % size;
        edges[2 * i + 1] = (i + size - 1) % size;
    }
    MPI_Comm g;
    MPI_Graph_create(MPI_COMM_WORLD, size, index, edges, 0, &g);
    suite_count("MPI_Graph_create", 0);
    int s[2] = { rank, rank }, r[4] = { -1, -1, -1, -1 };
    MPI_Neighbor_allgather(s, 2, MPI_INT, r, 2, MPI_INT, g); /* 2 ints to each of 2 */
    suite_count("MPI_Neighbor_allgather", 16);
    suite_check(r[1] == to && r[3] == from, "graph neighbor_allgather");
    MPI_Request req;
    MPI_Ineighbor_allgather(s, 1, MPI_INT, r, 1, MPI_INT, g, &req);
    suite_count("MPI_Ineighbor_allgather", 8);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    suite_count("MPI_Wait", 0);
    suite_check(r[0] == to && r[1] == from, "graph ineighbor_allgather");
    return g;
}

/* The general distributed graph: this rank gives one edge, to the next rank. */
static MPI_Comm dist(int from, int to)
{
    MPI_Comm g;
    int degree = 1, weight = 1;
    MPI_Dist_graph_create(MPI_COMM_WORLD, 1, &rank, &degree, &to, &weight, MPI_INFO_NULL, 0,
                          &g);
    suite_count("MPI_Dist_graph_create", 0);
    int s[5] = { rank, rank, rank, rank, rank }, r[5] = { -1, -1, -1, -1, -1 };
    MPI_Neighbor_alltoall(s, 5, MPI_INT, r, 5, MPI_INT, g);
    suite_count("MPI_Neighbor_alltoall", 20);
    suite_check(r[4] == from, "dist neighbor_alltoall");
    int counts[1] = { 3 }, displs[1] = { 0 };
    MPI_Neighbor_allgatherv(s, 3, MPI_INT, r, counts, displs, MPI_INT, g);
    suite_count("MPI_Neighbor_allgatherv", 12);
    suite_check(r[2] == from, "dist neighbor_allgatherv");
    return g;
}

int main(int argc, char **argv)
{
    suite_init(&argc, &argv, &rank, &size);
    int to = (rank + 1) % size, from = (rank + size - 1) % size;
    MPI_Comm made[3];
    made[0] = adjacent(from, to); /* one statement each: made in this order on every rank */
    made[1] = graph(from, to);
    made[2] = dist(from, to);
    for (int i = 0; i < 3; i++) {
        MPI_Comm_free(&made[i]);
        suite_count("MPI_Comm_free", 0);
    }
    return suite_end();
}
