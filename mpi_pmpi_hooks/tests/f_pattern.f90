! f_pattern.f90 — a Fortran MPI program (`use mpi`) with a known pattern.
! Any number of ranks >= 2.
!
! Point-to-point: for every ordered pair (r, p), r /= p, rank r sends rank p
! one message of 10*(p+1)+r default integers (4 bytes each) with MPI_SEND;
! pairs (a, b), a < b, are walked in the same order everywhere, a sends
! first. Collectives: MPI_BCAST of 100 integers (400 bytes) from root 0,
! MPI_ALLREDUCE of 5 double precision values (40 bytes).
! EXPECTED: bytes(r, p) = 4*(10*(p+1)+r), one message each way per pair;
! per rank r: MPI_Send size-1 calls, MPI_Recv size-1 calls, MPI_Bcast 1
! call of 400 bytes (root 0), MPI_Allreduce 1 call of 40 bytes.
program f_pattern
  use mpi
  implicit none
  integer :: ierr, rank, nranks, a, b, peer, n
  integer :: status(MPI_STATUS_SIZE)
  integer, allocatable :: buf(:)
  integer :: bc(100)
  double precision :: x(5), y(5)

  call MPI_INIT(ierr)
  call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
  call MPI_COMM_SIZE(MPI_COMM_WORLD, nranks, ierr)
  allocate(buf(10 * (nranks + 1) + nranks))
  buf = 0
  do a = 0, nranks - 1
    do b = a + 1, nranks - 1
      if (rank /= a .and. rank /= b) cycle
      if (rank == a) then
        peer = b
      else
        peer = a
      end if
      n = 10 * (peer + 1) + rank
      if (rank == a) then
        call MPI_SEND(buf, n, MPI_INTEGER, peer, 1, MPI_COMM_WORLD, ierr)
        call MPI_RECV(buf, size(buf), MPI_INTEGER, peer, 1, MPI_COMM_WORLD, status, ierr)
      else
        call MPI_RECV(buf, size(buf), MPI_INTEGER, peer, 1, MPI_COMM_WORLD, status, ierr)
        call MPI_SEND(buf, n, MPI_INTEGER, peer, 1, MPI_COMM_WORLD, ierr)
      end if
    end do
  end do
  bc = rank
  call MPI_BCAST(bc, 100, MPI_INTEGER, 0, MPI_COMM_WORLD, ierr)
  x = 1.0d0
  call MPI_ALLREDUCE(x, y, 5, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
  call MPI_FINALIZE(ierr)
  if (rank == 0) print '(a)', 'f_pattern: done'
end program f_pattern
