/*
 * sessions.c — an MPI-4 sessions program (no MPI_Init): MPI_Session_init, the number of
 * process sets, each one's name (MPI_Session_get_nth_pset), the info of mpi://WORLD, its
 * group, a communicator made from it (MPI_Comm_create_from_group), a ring exchange of 64
 * bytes (MPI_Sendrecv to the next rank) and 5 MPI_Allreduce of 2 doubles on it, MPI_Comm_free, MPI_Session_finalize;
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
