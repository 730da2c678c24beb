// tests/callsites/cxx_sites.cpp — a C++ program whose MPI calls all go through the wrapper
// class app::Comm (comm.hpp, comm.cpp), from known lines. Every rank of n:
//   sum of 8 doubles (64 bytes), 3 times                     site:small
//   sum of 500 doubles (4000 bytes), 5 times                 site:large
//   send of 100 bytes to rank + 1 (mod n), 2 times           site:send
//   receive of 100 bytes from rank - 1 (mod n), 2 times      site:recv
// At depth 2 each site is (the wrapper's line in comm.cpp, this file's line).
#include <mpi.h>

#include <vector>

#include "comm.hpp"

/** Three sums of a small vector. */
__attribute__((noinline)) static double relax(const app::Comm &world)
{
    std::vector<double> small(8, 1.0);
    for (int i = 0; i < 3; i++)
        world.sum(small); /* site:small */
    return small[0];
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    {
        app::Comm world(MPI_COMM_WORLD);
        volatile double r = relax(world);
        (void)r;
        std::vector<double> large(500, 2.0);
        for (int i = 0; i < 5; i++)
            world.sum(large); /* site:large */
        std::vector<char> msg(100, static_cast<char>(world.rank()));
        int right = (world.rank() + 1) % world.size();
        int left = (world.rank() + world.size() - 1) % world.size();
        for (int i = 0; i < 2; i++) {
            world.send(msg, right); /* site:send */
            world.recv(msg, left); /* site:recv */
        }
    }
    MPI_Finalize();
    return 0;
}
