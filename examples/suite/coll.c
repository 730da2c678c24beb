/*
 * coll.c — every collective of the world communicator, blocking and non-blocking (each
 * completed by MPI_Wait), in its plain, v and w forms; see suite.h for what it prints.
 * Payload bytes as stacklens counts them (contract/mpi_functions.spec): the send count
 * x type on every rank (bytes=one: Bcast, Reduce, Allreduce, Scan, Exscan, Gather(v),
 * Allgather(v)), x the size (all: Alltoall, Reduce_scatter_block), the root's only
 * (root_all, root_sum: Scatter, Scatterv), the sum of the send counts (sum: Alltoallv,
 * Reduce_scatter) or of counts x their types (w: Alltoallw). Each result is checked.
 * Rank r sends j + 1 + r ints to rank j in the v and w forms.
 */
#include "suite.h"

#define N 8 /* ints per rank in the plain forms */

static int rank, size;

/* The blocking (nb = 0) or non-blocking (nb = 1, then MPI_Wait) form of each call. */
static void wait_if(int nb, MPI_Request *req)
{
    if (nb) {
        MPI_Wait(req, MPI_STATUS_IGNORE);
        suite_count("MPI_Wait", 0);
    }
}

/* "MPI_<name>" or "MPI_I<lowercase first letter...>": the op's name in either form. */
static const char *name_of(int nb, const char *blocking, const char *nonblocking)
{
    return nb ? nonblocking : blocking;
}

static void plain(int nb)
{
    int a[N], b[N * 16], all[16 * N];
    MPI_Request req;
    for (int i = 0; i < N; i++)
        a[i] = rank * 100 + i;
    const long long one = N * (long long)sizeof(int);

    if (nb) MPI_Ibarrier(MPI_COMM_WORLD, &req); else MPI_Barrier(MPI_COMM_WORLD);
    suite_count(name_of(nb, "MPI_Barrier", "MPI_Ibarrier"), 0);
    wait_if(nb, &req);

    memcpy(b, a, sizeof a);
    if (nb) MPI_Ibcast(b, N, MPI_INT, 0, MPI_COMM_WORLD, &req);
    else MPI_Bcast(b, N, MPI_INT, 0, MPI_COMM_WORLD);
    suite_count(name_of(nb, "MPI_Bcast", "MPI_Ibcast"), one);
    wait_if(nb, &req);
    suite_check(b[N - 1] == N - 1, nb ? "ibcast" : "bcast");

    if (nb) MPI_Ireduce(a, b, N, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD, &req);
    else MPI_Reduce(a, b, N, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    suite_count(name_of(nb, "MPI_Reduce", "MPI_Ireduce"), one);
    wait_if(nb, &req);
    if (rank == 0)
        suite_check(b[1] == 100 * size * (size - 1) / 2 + size, nb ? "ireduce" : "reduce");

    if (nb) MPI_Iallreduce(a, b, N, MPI_INT, MPI_MAX, MPI_COMM_WORLD, &req);
    else MPI_Allreduce(a, b, N, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    suite_count(name_of(nb, "MPI_Allreduce", "MPI_Iallreduce"), one);
    wait_if(nb, &req);
    suite_check(b[0] == 100 * (size - 1), nb ? "iallreduce" : "allreduce");

    if (nb) MPI_Iscan(a, b, N, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &req);
    else MPI_Scan(a, b, N, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    suite_count(name_of(nb, "MPI_Scan", "MPI_Iscan"), one);
    wait_if(nb, &req);
    suite_check(b[0] == 100 * rank * (rank + 1) / 2, nb ? "iscan" : "scan");

    if (nb) MPI_Iexscan(a, b, N, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &req);
    else MPI_Exscan(a, b, N, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    suite_count(name_of(nb, "MPI_Exscan", "MPI_Iexscan"), one);
    wait_if(nb, &req);
    if (rank > 0)
        suite_check(b[0] == 100 * rank * (rank - 1) / 2, nb ? "iexscan" : "exscan");

    if (nb) MPI_Igather(a, N, MPI_INT, all, N, MPI_INT, 0, MPI_COMM_WORLD, &req);
    else MPI_Gather(a, N, MPI_INT, all, N, MPI_INT, 0, MPI_COMM_WORLD);
    suite_count(name_of(nb, "MPI_Gather", "MPI_Igather"), one);
    wait_if(nb, &req);
    if (rank == 0)
        suite_check(all[N * (size - 1)] == 100 * (size - 1), nb ? "igather" : "gather");

    if (nb) MPI_Iallgather(a, N, MPI_INT, all, N, MPI_INT, MPI_COMM_WORLD, &req);
    else MPI_Allgather(a, N, MPI_INT, all, N, MPI_INT, MPI_COMM_WORLD);
    suite_count(name_of(nb, "MPI_Allgather", "MPI_Iallgather"), one);
    wait_if(nb, &req);
    suite_check(all[N * (size - 1) + 1] == 100 * (size - 1) + 1, nb ? "iallgather" : "allgather");

    if (nb) MPI_Iscatter(all, N, MPI_INT, b, N, MPI_INT, 0, MPI_COMM_WORLD, &req);
    else MPI_Scatter(all, N, MPI_INT, b, N, MPI_INT, 0, MPI_COMM_WORLD);
    suite_count(name_of(nb, "MPI_Scatter", "MPI_Iscatter"), rank == 0 ? one * size : 0);
    wait_if(nb, &req);
    suite_check(b[2] == 100 * rank + 2, nb ? "iscatter" : "scatter");

    int x[16], y[16];
    for (int j = 0; j < size; j++)
        x[j] = rank * 10 + j;
    if (nb) MPI_Ialltoall(x, 1, MPI_INT, y, 1, MPI_INT, MPI_COMM_WORLD, &req);
    else MPI_Alltoall(x, 1, MPI_INT, y, 1, MPI_INT, MPI_COMM_WORLD);
    suite_count(name_of(nb, "MPI_Alltoall", "MPI_Ialltoall"), (long long)sizeof(int) * size);
    wait_if(nb, &req);
    suite_check(y[size - 1] == (size - 1) * 10 + rank, nb ? "ialltoall" : "alltoall");

    if (nb) MPI_Ireduce_scatter_block(x, y, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &req);
    else MPI_Reduce_scatter_block(x, y, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    suite_count(name_of(nb, "MPI_Reduce_scatter_block", "MPI_Ireduce_scatter_block"),
                (long long)sizeof(int) * size);
    wait_if(nb, &req);
    suite_check(y[0] == 10 * size * (size - 1) / 2 + size * rank,
                nb ? "ireduce_scatter_block" : "reduce_scatter_block");
}

/* Where the ints for rank dest start in rank sender's send buffer (v and w forms). */
static int sdispl_of(int sender, int dest)
{
    int d = 0;
    for (int k = 0; k < dest; k++)
        d += k + 1 + sender;
    return d;
}

/* The v and w forms: rank r sends j + 1 + r ints to rank j. */
static void vector(int nb)
{
    int scount[16], sdispl[16], rcount[16], rdispl[16], types_bytes = 0, total = 0;
    int sbuf[256], rbuf[256];
    MPI_Datatype stype[16], rtype[16];
    MPI_Request req;
    for (int j = 0, s = 0, r = 0; j < size; j++) {
        scount[j] = j + 1 + rank;
        rcount[j] = rank + 1 + j;
        sdispl[j] = s;
        rdispl[j] = r;
        s += scount[j];
        r += rcount[j];
        stype[j] = rtype[j] = MPI_INT;
        types_bytes += scount[j] * (int)sizeof(int);
        total += scount[j];
    }
    for (int i = 0; i < 256; i++)
        sbuf[i] = rank * 1000 + i;

    if (nb) MPI_Ialltoallv(sbuf, scount, sdispl, MPI_INT, rbuf, rcount, rdispl, MPI_INT,
                           MPI_COMM_WORLD, &req);
    else MPI_Alltoallv(sbuf, scount, sdispl, MPI_INT, rbuf, rcount, rdispl, MPI_INT,
                       MPI_COMM_WORLD);
    suite_count(name_of(nb, "MPI_Alltoallv", "MPI_Ialltoallv"), total * (long long)sizeof(int));
    wait_if(nb, &req);
    suite_check(rbuf[rdispl[size - 1]] == (size - 1) * 1000 + sdispl_of(size - 1, rank),
                nb ? "ialltoallv" : "alltoallv");

    int wsd[16], wrd[16];
    for (int j = 0; j < size; j++) {
        wsd[j] = sdispl[j] * (int)sizeof(int);
        wrd[j] = rdispl[j] * (int)sizeof(int);
    }
    if (nb) MPI_Ialltoallw(sbuf, scount, wsd, stype, rbuf, rcount, wrd, rtype, MPI_COMM_WORLD,
                           &req);
    else MPI_Alltoallw(sbuf, scount, wsd, stype, rbuf, rcount, wrd, rtype, MPI_COMM_WORLD);
    suite_count(name_of(nb, "MPI_Alltoallw", "MPI_Ialltoallw"), types_bytes);
    wait_if(nb, &req);
    suite_check(rbuf[rdispl[0]] == sdispl_of(0, rank), nb ? "ialltoallw" : "alltoallw");

    /* Gatherv / Allgatherv: rank r contributes r + 1 ints. */
    int gcount[16], gdispl[16];
    for (int j = 0, d = 0; j < size; j++) {
        gcount[j] = j + 1;
        gdispl[j] = d;
        d += j + 1;
    }
    if (nb) MPI_Igatherv(sbuf, rank + 1, MPI_INT, rbuf, gcount, gdispl, MPI_INT, 0,
                         MPI_COMM_WORLD, &req);
    else MPI_Gatherv(sbuf, rank + 1, MPI_INT, rbuf, gcount, gdispl, MPI_INT, 0, MPI_COMM_WORLD);
    suite_count(name_of(nb, "MPI_Gatherv", "MPI_Igatherv"), (rank + 1) * (long long)sizeof(int));
    wait_if(nb, &req);
    if (rank == 0)
        suite_check(rbuf[gdispl[size - 1]] == (size - 1) * 1000, nb ? "igatherv" : "gatherv");

    if (nb) MPI_Iallgatherv(sbuf, rank + 1, MPI_INT, rbuf, gcount, gdispl, MPI_INT,
                            MPI_COMM_WORLD, &req);
    else MPI_Allgatherv(sbuf, rank + 1, MPI_INT, rbuf, gcount, gdispl, MPI_INT, MPI_COMM_WORLD);
    suite_count(name_of(nb, "MPI_Allgatherv", "MPI_Iallgatherv"),
                (rank + 1) * (long long)sizeof(int));
    wait_if(nb, &req);
    suite_check(rbuf[gdispl[size - 1] + size - 1] == (size - 1) * 1000 + size - 1,
                nb ? "iallgatherv" : "allgatherv");

    /* Scatterv from root 0: rank j gets j + 1 ints. */
    if (nb) MPI_Iscatterv(sbuf, gcount, gdispl, MPI_INT, rbuf, rank + 1, MPI_INT, 0,
                          MPI_COMM_WORLD, &req);
    else MPI_Scatterv(sbuf, gcount, gdispl, MPI_INT, rbuf, rank + 1, MPI_INT, 0, MPI_COMM_WORLD);
    suite_count(name_of(nb, "MPI_Scatterv", "MPI_Iscatterv"),
                rank == 0 ? (long long)gdispl[size - 1] * 4 + size * 4 : 0);
    wait_if(nb, &req);
    suite_check(rbuf[rank] == gdispl[rank] + rank, nb ? "iscatterv" : "scatterv");

    /* Reduce_scatter: rank j gets j + 1 ints of the sums. */
    if (nb) MPI_Ireduce_scatter(sbuf, rbuf, gcount, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &req);
    else MPI_Reduce_scatter(sbuf, rbuf, gcount, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    suite_count(name_of(nb, "MPI_Reduce_scatter", "MPI_Ireduce_scatter"),
                ((long long)gdispl[size - 1] + size) * (long long)sizeof(int));
    wait_if(nb, &req);
    suite_check(rbuf[0] == 1000 * size * (size - 1) / 2 + size * gdispl[rank],
                nb ? "ireduce_scatter" : "reduce_scatter");
}

int main(int argc, char **argv)
{
    suite_init(&argc, &argv, &rank, &size);
    for (int nb = 0; nb < 2; nb++) {
        plain(nb);
        vector(nb);
    }
    return suite_end();
}
