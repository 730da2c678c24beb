/*
 * cxx_pattern.cpp — a C++ MPI program (std::vector buffers, the C API from
 * C++) with a known pattern. Any number of ranks >= 2.
 *
 * Ring: rank r sends 100*(r+1) doubles (800*(r+1) bytes) to (r+1)%size and
 * receives from (r-1+size)%size with one MPI_Sendrecv; then MPI_Reduce of
 * 3 ints (12 bytes) to root 0, then MPI_Gather of 2 doubles (16 bytes) from
 * every rank to root size-1.
 * EXPECTED per rank r: p2p to (r+1)%size: 1 message, 800*(r+1) bytes;
 * MPI_Sendrecv 1 call; MPI_Reduce 1 call, 12 bytes, root 0; MPI_Gather 1
 * call, 16 bytes, root size-1.
 */
#include <mpi.h>

#include <cstdio>
#include <vector>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int right = (rank + 1) % size, left = (rank - 1 + size) % size;
    std::vector<double> out(100 * (rank + 1), 1.0), in(100 * size);
    MPI_Status st;
    MPI_Sendrecv(out.data(), static_cast<int>(out.size()), MPI_DOUBLE, right, 3, in.data(),
                 static_cast<int>(in.size()), MPI_DOUBLE, left, 3, MPI_COMM_WORLD, &st);
    int got = 0;
    MPI_Get_count(&st, MPI_DOUBLE, &got);
    std::vector<int> mine{rank, 1, got}, sum(3);
    MPI_Reduce(mine.data(), sum.data(), 3, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    std::vector<double> pair{1.0 * rank, 2.0}, all(2 * size);
    MPI_Gather(pair.data(), 2, MPI_DOUBLE, all.data(), 2, MPI_DOUBLE, size - 1, MPI_COMM_WORLD);
    int ok = got == 100 * (left + 1);
    MPI_Finalize();
    if (rank == 0)
        std::printf("cxx_pattern: %s\n", ok ? "ok" : "MISMATCH");
    return ok ? 0 : 1;
}
