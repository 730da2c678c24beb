/*
 * sessions.c — an MPI-4 sessions program (no MPI_Init): MPI_Session_init, the number of
 * process sets, each one's name (MPI_Session_get_nth_pset), the info of mpi://WORLD, its
 * group, a communicator made from it (MPI_Comm_create_from_group), a ring exchange of 64
 * bytes (MPI_Sendrecv to the next rank) and 5 MPI_Allreduce of 2 doubles on it, then on
 * the same session-derived communicator the other wrapper families: an MPI_Iallreduce of 2
 * doubles (+ MPI_Wait), a window (MPI_Win_allocate, MPI_Barrier, 2 MPI_Win_fence around an MPI_Put of
 * 2 ints to the next rank, MPI_Win_free), a periodic 1-D MPI_Cart_create with an
 * MPI_Neighbor_allgather of one int (4 bytes to each of 2 neighbours) and MPI_Comm_free of
 * it; MPI_Comm_free, MPI_Session_finalize. No MPI-IO: MPICH 4.0.2's MPI_File_open refuses
 * a sessions-only program ("MPIR_MPIOInit: MPI not initialized"), with or without stacklens;
 * see suite.h for what it prints (rank: in the session's communicator, the world rank).
 * Where mpi.h is older than MPI 4 (Open MPI 4.1) it is built as a program that says so.
 */
#include "suite.h"

#if MPI_VERSION >= 4
int main(void)
{
    MPI_Session s;
    MPI_Session_init(MPI_INFO_NULL, MPI_ERRORS_RETURN, &s);
    suite_count("MPI_Session_init", 0);
    int npsets;
    MPI_Session_get_num_psets(s, MPI_INFO_NULL, &npsets);
    suite_count("MPI_Session_get_num_psets", 0);
    suite_check(npsets >= 2, "process sets");
    int world_pset = 0;
    for (int n = 0; n < npsets; n++) {
        char name[256];
        int len = (int)sizeof name;
        MPI_Session_get_nth_pset(s, MPI_INFO_NULL, n, &len, name);
        suite_count("MPI_Session_get_nth_pset", 0);
        world_pset |= strcmp(name, "mpi://WORLD") == 0;
    }
    suite_check(world_pset, "mpi://WORLD listed");
    MPI_Info info;
    MPI_Session_get_pset_info(s, "mpi://WORLD", &info);
    suite_count("MPI_Session_get_pset_info", 0);
    MPI_Info_free(&info);
    MPI_Group group;
    MPI_Group_from_session_pset(s, "mpi://WORLD", &group);
    suite_count("MPI_Group_from_session_pset", 0);
    MPI_Comm comm;
    MPI_Comm_create_from_group(group, "stacklens.suite", MPI_INFO_NULL, MPI_ERRORS_RETURN,
                               &comm);
    suite_count("MPI_Comm_create_from_group", 0);
    MPI_Group_free(&group);
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    suite_rank = rank;
    char out[64], in[64] = { 0 };
    memset(out, 'A' + rank, sizeof out);
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    MPI_Sendrecv(out, 64, MPI_BYTE, next, 1, in, 64, MPI_BYTE, prev, 1, comm, MPI_STATUS_IGNORE);
    suite_count("MPI_Sendrecv", 64);
    suite_check(in[63] == 'A' + prev, "ring");
    double a[2] = { rank, 1 }, b[2];
    for (int i = 0; i < 5; i++) {
        MPI_Allreduce(a, b, 2, MPI_DOUBLE, MPI_SUM, comm);
        suite_count("MPI_Allreduce", 16);
    }
    suite_check(b[1] == size, "allreduce");

    MPI_Request req;
    MPI_Iallreduce(a, b, 2, MPI_DOUBLE, MPI_SUM, comm, &req);
    suite_count("MPI_Iallreduce", 16);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    suite_count("MPI_Wait", 0);
    suite_check(b[1] == size, "iallreduce");

    int *cell;
    MPI_Win win;
    MPI_Win_allocate(16 * sizeof(int), sizeof(int), MPI_INFO_NULL, comm, &cell, &win);
    suite_count("MPI_Win_allocate", 0);
    for (int i = 0; i < 16; i++)
        cell[i] = -1;
    MPI_Barrier(comm); /* the stores above before any put (a first fence need not wait) */
    suite_count("MPI_Barrier", 0);
    MPI_Win_fence(0, win);
    suite_count("MPI_Win_fence", 0);
    int mine[2] = { rank, rank };
    MPI_Put(mine, 2, MPI_INT, next, 2 * rank, 2, MPI_INT, win);
    suite_count("MPI_Put", 8);
    MPI_Win_fence(0, win);
    suite_count("MPI_Win_fence", 0);
    suite_check(cell[2 * prev] == prev && cell[2 * prev + 1] == prev, "put");
    MPI_Win_free(&win);
    suite_count("MPI_Win_free", 0);

    MPI_Comm ring;
    int dims[1] = { size }, periods[1] = { 1 };
    MPI_Cart_create(comm, 1, dims, periods, 0, &ring);
    suite_count("MPI_Cart_create", 0);
    int got[2] = { -1, -1 };
    MPI_Neighbor_allgather(&rank, 1, MPI_INT, got, 1, MPI_INT, ring);
    suite_count("MPI_Neighbor_allgather", 8);
    suite_check(got[0] == prev && got[1] == next, "neighbor_allgather");
    MPI_Comm_free(&ring);
    suite_count("MPI_Comm_free", 0);

    MPI_Comm_free(&comm);
    suite_count("MPI_Comm_free", 0);
    MPI_Session_finalize(&s);
    suite_count("MPI_Session_finalize", 0);
    return suite_report();
}
#else
int main(void)
{
    printf("sessions: this MPI (MPI %d.%d) has none\n", MPI_VERSION, MPI_SUBVERSION);
    return 0;
}
#endif
