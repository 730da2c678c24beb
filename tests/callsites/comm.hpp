// tests/callsites/comm.hpp — a C++ wrapper class over MPI, as application codes write
// them: the program calls these methods, the methods call MPI. The methods are defined in
// comm.cpp (their own translation unit, so each is a real frame): at
// STACKLENS_CALLSITE_DEPTH=2 a site is (the wrapper's MPI call, the user's call of it).
#pragma once

#include <mpi.h>

#include <vector>

namespace app {

/** A communicator: rank, size, a sum over all ranks, and byte messages. */
class Comm {
  public:
    explicit Comm(MPI_Comm comm);
    int rank() const { return rank_; }
    int size() const { return size_; }
    /** Sums v element-wise over all ranks, in place (MPI_Allreduce). */
    void sum(std::vector<double> &v) const;
    /** Sends the bytes of b to rank `to` (MPI_Send, tag 0). */
    void send(const std::vector<char> &b, int to) const;
    /** Receives b.size() bytes from rank `from` into b (MPI_Recv, tag 0). */
    void recv(std::vector<char> &b, int from) const;

  private:
    MPI_Comm comm_;
    int rank_ = 0, size_ = 1;
};

} // namespace app
