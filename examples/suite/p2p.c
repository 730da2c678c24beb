/*
 * p2p.c — point-to-point in every mode, between ranks 0 and 1 (other ranks only start
 * and end); see suite.h for what it prints. Payloads: MPI_Send 400 bytes (received with
 * a larger count), MPI_Ssend 400, MPI_Bsend 30, MPI_Rsend 64 (into a posted MPI_Irecv),
 * MPI_Isend 10, MPI_Issend 20, MPI_Ibsend 40, MPI_Irsend 80, MPI_Sendrecv 16 each way,
 * MPI_Sendrecv_replace 24 each way, a persistent send of 12 bytes started 3 times,
 * MPI_Probe + MPI_Iprobe + MPI_Recv of 7 bytes, MPI_Mprobe + MPI_Mrecv of 9 bytes,
 * MPI_Probe + MPI_Improbe + MPI_Imrecv of 11 bytes.
 */
#include "suite.h"

static char sbuf[1024], rbuf[1024];

/* The receiving side's bytes come from the status. */
static int received(const MPI_Status *st)
{
    int n;
    MPI_Get_count(st, MPI_BYTE, &n);
    return n;
}

static void sender(int peer)
{
    int ints[100];
    for (int i = 0; i < 100; i++)
        ints[i] = i;
    MPI_Send(ints, 100, MPI_INT, peer, 1, MPI_COMM_WORLD);
    suite_count("MPI_Send", 400);
    double d[50];
    MPI_Recv(d, 50, MPI_DOUBLE, peer, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    suite_count("MPI_Recv", 400);
    suite_check(d[49] == 49.5, "ssend data");

    static char bsend[4 * MPI_BSEND_OVERHEAD + 256];
    MPI_Buffer_attach(bsend, sizeof bsend);
    MPI_Bsend(sbuf, 30, MPI_BYTE, peer, 3, MPI_COMM_WORLD);
    suite_count("MPI_Bsend", 30);

    MPI_Barrier(MPI_COMM_WORLD); /* the peer's receive for the Rsend is posted */
    suite_count("MPI_Barrier", 0);
    MPI_Rsend(sbuf, 64, MPI_BYTE, peer, 4, MPI_COMM_WORLD);
    suite_count("MPI_Rsend", 64);

    MPI_Barrier(MPI_COMM_WORLD); /* the peer's 4 receives are posted */
    suite_count("MPI_Barrier", 0);
    MPI_Request req[4];
    MPI_Isend(sbuf, 10, MPI_BYTE, peer, 5, MPI_COMM_WORLD, &req[0]);
    suite_count("MPI_Isend", 10);
    MPI_Issend(sbuf, 20, MPI_BYTE, peer, 6, MPI_COMM_WORLD, &req[1]);
    suite_count("MPI_Issend", 20);
    MPI_Ibsend(sbuf, 40, MPI_BYTE, peer, 7, MPI_COMM_WORLD, &req[2]);
    suite_count("MPI_Ibsend", 40);
    MPI_Irsend(sbuf, 80, MPI_BYTE, peer, 8, MPI_COMM_WORLD, &req[3]);
    suite_count("MPI_Irsend", 80);
    MPI_Status sts[4];
    MPI_Waitall(4, req, sts);
    suite_count("MPI_Waitall", 0);
    void *detached;
    int detached_size;
    MPI_Buffer_detach(&detached, &detached_size);

    MPI_Request p;
    MPI_Send_init(sbuf, 12, MPI_BYTE, peer, 9, MPI_COMM_WORLD, &p);
    suite_count("MPI_Send_init", 0);
    for (int i = 0; i < 3; i++) {
        MPI_Start(&p);
        suite_count("MPI_Start", 0);
        suite_bytes("MPI_Send_init", 12);
        MPI_Wait(&p, MPI_STATUS_IGNORE);
        suite_count("MPI_Wait", 0);
    }
    MPI_Request_free(&p);
    suite_count("MPI_Request_free", 0);

    MPI_Send(sbuf, 7, MPI_BYTE, peer, 10, MPI_COMM_WORLD);
    suite_count("MPI_Send", 7);
    MPI_Send(sbuf, 9, MPI_BYTE, peer, 11, MPI_COMM_WORLD);
    suite_count("MPI_Send", 9);
    MPI_Send(sbuf, 11, MPI_BYTE, peer, 12, MPI_COMM_WORLD);
    suite_count("MPI_Send", 11);
}

static void receiver(int peer)
{
    int ints[200];
    MPI_Status st;
    MPI_Recv(ints, 200, MPI_INT, peer, 1, MPI_COMM_WORLD, &st);
    suite_count("MPI_Recv", received(&st));
    suite_check(ints[99] == 99, "send data");
    double d[50];
    for (int i = 0; i < 50; i++)
        d[i] = i + 0.5;
    MPI_Ssend(d, 50, MPI_DOUBLE, peer, 2, MPI_COMM_WORLD);
    suite_count("MPI_Ssend", 400);

    MPI_Recv(rbuf, 100, MPI_BYTE, peer, 3, MPI_COMM_WORLD, &st);
    suite_count("MPI_Recv", received(&st));

    MPI_Request r;
    MPI_Irecv(rbuf, 64, MPI_BYTE, peer, 4, MPI_COMM_WORLD, &r);
    suite_count("MPI_Irecv", 0);
    MPI_Barrier(MPI_COMM_WORLD);
    suite_count("MPI_Barrier", 0);
    MPI_Wait(&r, &st);
    suite_count("MPI_Wait", 0);
    suite_bytes("MPI_Irecv", received(&st));

    MPI_Request req[4];
    static char four[4][128];
    for (int i = 0; i < 4; i++) {
        MPI_Irecv(four[i], 128, MPI_BYTE, peer, 5 + i, MPI_COMM_WORLD, &req[i]);
        suite_count("MPI_Irecv", 0);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    suite_count("MPI_Barrier", 0);
    MPI_Status sts[4];
    MPI_Waitall(4, req, sts);
    suite_count("MPI_Waitall", 0);
    for (int i = 0; i < 4; i++)
        suite_bytes("MPI_Irecv", received(&sts[i]));

    MPI_Request p;
    MPI_Recv_init(rbuf, 12, MPI_BYTE, peer, 9, MPI_COMM_WORLD, &p);
    suite_count("MPI_Recv_init", 0);
    for (int i = 0; i < 3; i++) {
        MPI_Start(&p);
        suite_count("MPI_Start", 0);
        MPI_Wait(&p, &st);
        suite_count("MPI_Wait", 0);
        suite_bytes("MPI_Recv_init", received(&st));
    }
    MPI_Request_free(&p);
    suite_count("MPI_Request_free", 0);

    int flag;
    MPI_Probe(peer, 10, MPI_COMM_WORLD, &st);
    suite_count("MPI_Probe", 0);
    MPI_Iprobe(peer, 10, MPI_COMM_WORLD, &flag, &st); /* the message is there: flag 1 */
    suite_count("MPI_Iprobe", 0);
    suite_check(flag == 1, "iprobe found");
    MPI_Recv(rbuf, 7, MPI_BYTE, peer, 10, MPI_COMM_WORLD, &st);
    suite_count("MPI_Recv", received(&st));

    MPI_Message m;
    MPI_Mprobe(peer, 11, MPI_COMM_WORLD, &m, &st);
    suite_count("MPI_Mprobe", 0);
    MPI_Mrecv(rbuf, 9, MPI_BYTE, &m, &st);
    suite_count("MPI_Mrecv", received(&st));

    MPI_Probe(peer, 12, MPI_COMM_WORLD, &st);
    suite_count("MPI_Probe", 0);
    MPI_Improbe(peer, 12, MPI_COMM_WORLD, &flag, &m, &st);
    suite_count("MPI_Improbe", 0);
    suite_check(flag == 1, "improbe found");
    MPI_Imrecv(rbuf, 11, MPI_BYTE, &m, &r);
    suite_count("MPI_Imrecv", 0);
    MPI_Wait(&r, &st);
    suite_count("MPI_Wait", 0);
    suite_bytes("MPI_Imrecv", received(&st));
}

/* Both ranks: Sendrecv and Sendrecv_replace with each other. */
static void both(int peer)
{
    char s[16], r[16] = { 0 };
    memset(s, 'a' + suite_rank, sizeof s);
    MPI_Status st;
    MPI_Sendrecv(s, 16, MPI_BYTE, peer, 13, r, 16, MPI_BYTE, peer, 13, MPI_COMM_WORLD, &st);
    suite_count("MPI_Sendrecv", 16); /* the bytes sent (received ones: the p2p table) */
    suite_check(r[15] == 'a' + peer, "sendrecv data");
    char x[24];
    memset(x, 'k' + suite_rank, sizeof x);
    MPI_Sendrecv_replace(x, 24, MPI_BYTE, peer, 14, peer, 14, MPI_COMM_WORLD, &st);
    suite_count("MPI_Sendrecv_replace", 24);
    suite_check(x[0] == 'k' + peer, "sendrecv_replace data");
}

int main(int argc, char **argv)
{
    int rank, size;
    suite_init(&argc, &argv, &rank, &size);
    if (rank == 0)
        sender(1);
    else if (rank == 1)
        receiver(0);
    else {
        for (int i = 0; i < 2; i++) {
            MPI_Barrier(MPI_COMM_WORLD);
            suite_count("MPI_Barrier", 0);
        }
    }
    if (rank < 2)
        both(1 - rank);
    return suite_end();
}
