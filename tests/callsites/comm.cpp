// tests/callsites/comm.cpp — the wrapper class's MPI calls (comm.hpp), each on a marked line.
#include "comm.hpp"

namespace app {

Comm::Comm(MPI_Comm comm) : comm_(comm)
{
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
}

void Comm::sum(std::vector<double> &v) const
{
    MPI_Allreduce(MPI_IN_PLACE, v.data(), static_cast<int>(v.size()), MPI_DOUBLE, MPI_SUM, comm_); /* site:wrap_sum */
}

void Comm::send(const std::vector<char> &b, int to) const
{
    MPI_Send(b.data(), static_cast<int>(b.size()), MPI_BYTE, to, 0, comm_); /* site:wrap_send */
}

void Comm::recv(std::vector<char> &b, int from) const
{
    MPI_Recv(b.data(), static_cast<int>(b.size()), MPI_BYTE, from, 0, comm_, MPI_STATUS_IGNORE); /* site:wrap_recv */
}

} // namespace app
