/*
 * families_inter.c — communicators made from groups and inter-communicators, with known
 * traffic (tests/hooks/test_families.py). Run on 4 ranks.
 *
 *   evens   MPI_Comm_create_group of world ranks {0, 2} (called by those two only);
 *           3 x MPI_Allreduce of 16 ints (64 bytes per call and rank)
 *   odds    MPI_Comm_create of world ranks {1, 3} (called by every rank; the evens get
 *           MPI_COMM_NULL); 2 x MPI_Bcast of 128 bytes from rank 0 of the group
 *   inter   MPI_Intercomm_create of evens and odds (leaders: world ranks 0 and 1);
 *           every rank sends 2 messages of 500 bytes to the rank of its own local rank
 *           in the remote group (0 <-> 1, 2 <-> 3) and receives theirs (MPI_Sendrecv)
 *   merged  MPI_Intercomm_merge of inter, the odds high: ranks 0, 2, 1, 3 in that order;
 *           1 x MPI_Allreduce of one double
 * Every communicator is freed before MPI_Finalize.
 */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != 4) {
        fprintf(stderr, "families_inter: run on 4 ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    static int ints[16];
    static char block[128], out[500], in[500];
    static double one[1];
    MPI_Group world_group, evens_group, odds_group;
    MPI_Comm_group(MPI_COMM_WORLD, &world_group);
    int evens_ranks[2] = { 0, 2 }, odds_ranks[2] = { 1, 3 };
    MPI_Group_incl(world_group, 2, evens_ranks, &evens_group);
    MPI_Group_incl(world_group, 2, odds_ranks, &odds_group);

    MPI_Comm local = MPI_COMM_NULL, odds = MPI_COMM_NULL;
    if (rank % 2 == 0)
        MPI_Comm_create_group(MPI_COMM_WORLD, evens_group, 5, &local);
    MPI_Comm_create(MPI_COMM_WORLD, odds_group, &odds);
    if (rank % 2 == 0) {
        for (int i = 0; i < 3; i++)
            MPI_Allreduce(MPI_IN_PLACE, ints, 16, MPI_INT, MPI_SUM, local);
    } else {
        local = odds;
        for (int i = 0; i < 2; i++)
            MPI_Bcast(block, 128, MPI_CHAR, 0, local);
    }

    MPI_Comm inter, merged;
    MPI_Intercomm_create(local, 0, MPI_COMM_WORLD, rank % 2 == 0 ? 1 : 0, 9, &inter);
    int me;
    MPI_Comm_rank(inter, &me);
    for (int i = 0; i < 2; i++)
        MPI_Sendrecv(out, 500, MPI_CHAR, me, 3, in, 500, MPI_CHAR, me, 3, inter,
                     MPI_STATUS_IGNORE);
    MPI_Intercomm_merge(inter, rank % 2, &merged);
    MPI_Allreduce(MPI_IN_PLACE, one, 1, MPI_DOUBLE, MPI_SUM, merged);

    MPI_Comm_free(&merged);
    MPI_Comm_free(&inter);
    MPI_Comm_free(&local);
    MPI_Group_free(&odds_group);
    MPI_Group_free(&evens_group);
    MPI_Group_free(&world_group);
    MPI_Finalize();
    return 0;
}
