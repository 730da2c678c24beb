/*
 * p2p_pattern.c — deterministic point-to-point workload with known totals,
 * for checking libstacklens end to end.
 *
 * Usage: p2p_pattern            (any number of ranks, size >= 1)
 *
 * EXPECTED TOTALS (what a test recomputes). For every ordered pair of world
 * ranks (r, p) with r != p, rank r sends to rank p exactly
 *
 *     msgs(r, p)  = r + 1
 *     bytes(r, p) = (r + 1) * (1000 * (p + 1) + r)
 *
 * (each message is 1000 * (p + 1) + r bytes of MPI_BYTE), and rank p
 * receives exactly those messages from r: recv bytes/msgs at p from r equal
 * bytes(r, p) / msgs(r, p). There is no traffic from a rank to itself.
 * Op counts per rank r (message i = 0..r of a batch goes with MPI_Send for
 * even i, with MPI_Isend + MPI_Wait for odd i):
 *     MPI_Send      ceil((r + 1) / 2) * (size - 1) calls
 *     MPI_Isend     floor((r + 1) / 2) * (size - 1) calls
 *     MPI_Recv      sum over p != r of (p + 1) calls, sum of bytes(p, r) bytes
 *     MPI_Allreduce 1 call, 24 bytes (3 x MPI_LONG_LONG)
 * The op bytes of MPI_Send + MPI_Isend add up to sum over p != r of bytes(r, p).
 *
 * Messages with odd i travel on a communicator whose ranks are reversed
 * (MPI_Comm_split with key size-1-r), so a tool must translate ranks to
 * MPI_COMM_WORLD to get the pairs right. Receives alternate between a real
 * status and MPI_STATUS_IGNORE.
 *
 * Order: all ranks walk the pairs (a, b), a < b, in the same lexicographic
 * order; in pair (a, b), a sends its batch to b then receives b's batch,
 * and b does the opposite. Every send is complete before the next starts,
 * so the globally first unfinished pair always has both ranks at it and the
 * program cannot deadlock, with any message size or eager limit.
 *
 * At the end an MPI_Allreduce sums bytes sent and received over all ranks
 * and checks that they agree with the formula; the exit status is 1 if not.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

/* Size in bytes of each message from rank r to rank p. */
static int msg_bytes(int r, int p)
{
    return 1000 * (p + 1) + r;
}

/* Sends rank me's batch of me+1 messages to peer; returns the bytes sent. */
static long long send_batch(int me, int peer, int size, MPI_Comm rev, char *buf)
{
    long long total = 0;
    for (int i = 0; i <= me; i++) {
        int n = msg_bytes(me, peer);
        if (i % 2 == 0) {
            MPI_Send(buf, n, MPI_BYTE, peer, i, MPI_COMM_WORLD);
        } else {
            MPI_Request req;
            MPI_Isend(buf, n, MPI_BYTE, size - 1 - peer, i, rev, &req);
            MPI_Wait(&req, MPI_STATUS_IGNORE);
        }
        total += n;
    }
    return total;
}

/* Receives peer's batch of peer+1 messages; returns the bytes received (-1 on a size mismatch). */
static long long recv_batch(int me, int peer, int size, MPI_Comm rev, char *buf, int cap)
{
    long long total = 0;
    for (int i = 0; i <= peer; i++) {
        int n = msg_bytes(peer, me), got = n;
        if (i % 2 == 0) {
            MPI_Recv(buf, cap, MPI_BYTE, peer, i, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Status st;
            MPI_Recv(buf, cap, MPI_BYTE, size - 1 - peer, i, rev, &st);
            MPI_Get_count(&st, MPI_BYTE, &got);
        }
        if (got != n)
            return -1;
        total += n;
    }
    return total;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm rev;
    MPI_Comm_split(MPI_COMM_WORLD, 0, size - 1 - rank, &rev);

    int cap = msg_bytes(size, size);
    char *buf = calloc((size_t)cap, 1);
    if (buf == NULL)
        MPI_Abort(MPI_COMM_WORLD, 2);

    long long sent = 0, received = 0;
    int bad = 0;
    for (int a = 0; a < size; a++) {
        for (int b = a + 1; b < size; b++) {
            if (rank != a && rank != b)
                continue;
            int peer = rank == a ? b : a;
            long long got;
            if (rank == a) {
                sent += send_batch(rank, peer, size, rev, buf);
                got = recv_batch(rank, peer, size, rev, buf, cap);
            } else {
                got = recv_batch(rank, peer, size, rev, buf, cap);
                sent += send_batch(rank, peer, size, rev, buf);
            }
            if (got < 0)
                bad = 1;
            else
                received += got;
        }
    }

    long long expected = 0;
    for (int r = 0; r < size; r++)
        for (int p = 0; p < size; p++)
            if (r != p)
                expected += (long long)(r + 1) * msg_bytes(r, p);
    long long mine[3] = { sent, received, bad }, all[3];
    MPI_Allreduce(mine, all, 3, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    int ok = all[0] == expected && all[1] == expected && all[2] == 0;
    if (rank == 0)
        printf("p2p_pattern: %d ranks, %lld bytes sent, %lld received, %lld expected: %s\n",
               size, all[0], all[1], expected, ok ? "ok" : "MISMATCH");

    free(buf);
    MPI_Comm_free(&rev);
    MPI_Finalize();
    return ok ? 0 : 1;
}
