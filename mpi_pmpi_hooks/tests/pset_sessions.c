/*
 * pset_sessions.c — an MPI-4 sessions program (no MPI_Init) whose first communicator is
 * over mpi://SELF, not mpi://WORLD, so the hooks start counting on a communicator that is
 * not the whole launch. Run with MPICH 4 on any number of ranks n.
 *
 * EXPECTED TOTALS. 3 MPI_Allreduce of one int on the first communicator (size 1); then a
 * second communicator over mpi://WORLD, on which every rank calls MPI_Sendrecv 4 times,
 * 100 bytes (MPI_BYTE) to the next rank, from the previous one. Per rank:
 * MPI_Session_init 1, MPI_Group_from_session_pset 2, MPI_Comm_create_from_group 2,
 * MPI_Allreduce 3, MPI_Sendrecv 4, MPI_Comm_free 2, MPI_Session_finalize 1.
 *
 * The first communicator's group, by the argument:
 *   self  (default) the mpi://SELF process set;
 *   incl  a subgroup of mpi://WORLD made with MPI_Group_incl: this process alone (the
 *         subgroups MPICH 4.0.2 can make a communicator of; per rank 1 MPI_Group_incl
 *         more, and MPI_Group_from_session_pset is called once: the world's group is
 *         kept for the second communicator);
 *   pair  the subgroup of world ranks 0 and 1 (the others make none): MPICH 4.0.2's
 *         MPI_Comm_create_from_group asserts that a group is the world's or self's
 *         (comm_impl.c, is_self_group) and aborts, with or without stacklens.
 *
 * Prints "rank R of N: done" (in mpi://WORLD); exit status 0, 1 if a result differs.
 */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

/* A communicator over group (then freed), with the tag. */
static MPI_Comm comm_of(MPI_Group *group, const char *tag)
{
    MPI_Comm comm;
    MPI_Comm_create_from_group(*group, tag, MPI_INFO_NULL, MPI_ERRORS_ARE_FATAL, &comm);
    MPI_Group_free(group);
    return comm;
}

/* 4 MPI_Sendrecv of 100 bytes (filled with world rank me) to rank `to` and from rank
 * `from` of comm; 0 if every message holds world rank from_world. */
static int exchange(MPI_Comm comm, int me, int to, int from, int from_world)
{
    char out[100], in[100];
    int bad = 0;
    memset(out, me, sizeof out);
    for (int i = 0; i < 4; i++) {
        MPI_Sendrecv(out, sizeof out, MPI_BYTE, to, i, in, sizeof in, MPI_BYTE, from, i, comm,
                     MPI_STATUS_IGNORE);
        bad |= in[99] != (char)from_world;
    }
    return bad;
}

/* 3 MPI_Allreduce of one int (this rank's value v) on comm; 0 if each sum is want. */
static int sums(MPI_Comm comm, int v, int want)
{
    int bad = 0;
    for (int i = 0; i < 3; i++) {
        int sum = -1;
        MPI_Allreduce(&v, &sum, 1, MPI_INT, MPI_SUM, comm);
        bad |= sum != want;
    }
    return bad;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "self";
    MPI_Session s;
    MPI_Group first_group, world_group;
    int rank, size, bad = 0;
    MPI_Session_init(MPI_INFO_NULL, MPI_ERRORS_ARE_FATAL, &s);
    if (strcmp(mode, "self") == 0) {
        MPI_Group_from_session_pset(s, "mpi://SELF", &first_group);
    } else {
        MPI_Group_from_session_pset(s, "mpi://WORLD", &world_group);
        MPI_Group_rank(world_group, &rank);
        int pair[2] = { 0, 1 };
        int n = strcmp(mode, "pair") == 0 ? 2 : 1;
        MPI_Group_incl(world_group, n, n == 2 ? pair : &rank, &first_group);
        if (n == 2 && rank >= 2)
            MPI_Group_free(&first_group); /* not a member: no first communicator */
    }
    MPI_Comm first = MPI_COMM_NULL;
    if (first_group != MPI_GROUP_NULL) {
        int members;
        MPI_Group_size(first_group, &members);
        first = comm_of(&first_group, "org.stacklens.test.first");
        bad |= sums(first, 7, 7 * members);
    }
    if (strcmp(mode, "self") == 0)
        MPI_Group_from_session_pset(s, "mpi://WORLD", &world_group);
    MPI_Comm world = comm_of(&world_group, "org.stacklens.test.world");
    MPI_Comm_rank(world, &rank);
    MPI_Comm_size(world, &size);
    int from = (rank + size - 1) % size;
    bad |= exchange(world, rank, (rank + 1) % size, from, from);
    MPI_Comm_free(&world);
    if (first != MPI_COMM_NULL)
        MPI_Comm_free(&first);
    MPI_Session_finalize(&s);
    printf("rank %d of %d: done\n", rank, size);
    return bad;
}
