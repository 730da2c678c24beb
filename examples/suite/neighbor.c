/*
 * neighbor.c — the neighbourhood collectives, blocking and non-blocking (completed by
 * MPI_Wait), on a periodic 1-D Cartesian grid of every rank (2 neighbours each: the
 * rank before and after; run it on 3 ranks or more, so that they differ); see suite.h
 * for what it prints (neighbor_graph.c: on a distributed graph). Payload bytes as
 * stacklens counts them: the send count x type for each out-neighbour (bytes=nbr), the
 * sum of the send counts (nbr_sum) or of counts x their types (nbr_w) over the
 * out-neighbours.
 */
#include "suite.h"

static int rank, size;

static void wait_if(int nb, MPI_Request *req)
{
    if (nb) {
        MPI_Wait(req, MPI_STATUS_IGNORE);
        suite_count("MPI_Wait", 0);
    }
}

/* On the ring: every form, each neighbour sent rank * 10 + i. */
static void ring(MPI_Comm cart, int nb)
{
    int left, right, s[8], r[16];
    MPI_Cart_shift(cart, 0, 1, &left, &right);
    for (int i = 0; i < 8; i++)
        s[i] = rank * 10 + i;
    MPI_Request req;
    const long long four = sizeof(int);

    if (nb) MPI_Ineighbor_allgather(s, 3, MPI_INT, r, 3, MPI_INT, cart, &req);
    else MPI_Neighbor_allgather(s, 3, MPI_INT, r, 3, MPI_INT, cart);
    suite_count(nb ? "MPI_Ineighbor_allgather" : "MPI_Neighbor_allgather", 3 * four * 2);
    wait_if(nb, &req);
    suite_check(r[0] == left * 10 && r[5] == right * 10 + 2, nb ? "ineighbor_allgather"
                                                                : "neighbor_allgather");

    int counts[2] = { 2, 2 }, displs[2] = { 0, 2 };
    if (nb) MPI_Ineighbor_allgatherv(s, 2, MPI_INT, r, counts, displs, MPI_INT, cart, &req);
    else MPI_Neighbor_allgatherv(s, 2, MPI_INT, r, counts, displs, MPI_INT, cart);
    suite_count(nb ? "MPI_Ineighbor_allgatherv" : "MPI_Neighbor_allgatherv", 2 * four * 2);
    wait_if(nb, &req);
    suite_check(r[2] == right * 10, nb ? "ineighbor_allgatherv" : "neighbor_allgatherv");

    if (nb) MPI_Ineighbor_alltoall(s, 2, MPI_INT, r, 2, MPI_INT, cart, &req);
    else MPI_Neighbor_alltoall(s, 2, MPI_INT, r, 2, MPI_INT, cart);
    suite_count(nb ? "MPI_Ineighbor_alltoall" : "MPI_Neighbor_alltoall", 2 * four * 2);
    wait_if(nb, &req);
    /* The left neighbour sent me its block for its right neighbour: ints 2 and 3. */
    suite_check(r[0] == left * 10 + 2, nb ? "ineighbor_alltoall" : "neighbor_alltoall");

    int sc[2] = { 1, 3 }, sd[2] = { 0, 1 }, rc[2] = { 3, 1 }, rd[2] = { 0, 3 };
    if (nb) MPI_Ineighbor_alltoallv(s, sc, sd, MPI_INT, r, rc, rd, MPI_INT, cart, &req);
    else MPI_Neighbor_alltoallv(s, sc, sd, MPI_INT, r, rc, rd, MPI_INT, cart);
    suite_count(nb ? "MPI_Ineighbor_alltoallv" : "MPI_Neighbor_alltoallv", 4 * four);
    wait_if(nb, &req);
    suite_check(r[0] == left * 10 + 1 && r[3] == right * 10, nb ? "ineighbor_alltoallv"
                                                                 : "neighbor_alltoallv");

    MPI_Aint wsd[2] = { 0, 4 }, wrd[2] = { 0, 12 };
    MPI_Datatype types[2] = { MPI_INT, MPI_INT };
    if (nb) MPI_Ineighbor_alltoallw(s, sc, wsd, types, r, rc, wrd, types, cart, &req);
    else MPI_Neighbor_alltoallw(s, sc, wsd, types, r, rc, wrd, types, cart);
    suite_count(nb ? "MPI_Ineighbor_alltoallw" : "MPI_Neighbor_alltoallw", 4 * four);
    wait_if(nb, &req);
    suite_check(r[0] == left * 10 + 1 && r[3] == right * 10, nb ? "ineighbor_alltoallw"
                                                                 : "neighbor_alltoallw");
}

int main(int argc, char **argv)
{
    suite_init(&argc, &argv, &rank, &size);
    int dims[1] = { size }, periods[1] = { 1 };
    MPI_Comm cart;
    MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &cart);
    suite_count("MPI_Cart_create", 0);
    for (int nb = 0; nb < 2; nb++) {
        ring(cart, nb);
    }
    MPI_Comm_free(&cart);
    suite_count("MPI_Comm_free", 0);
    return suite_end();
}
