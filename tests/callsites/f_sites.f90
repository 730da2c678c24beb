! tests/callsites/f_sites.f90 — a Fortran `use mpi` program whose call sites are known.
! Every rank of n (each call on its own line, marked):
!   relax(): MPI_Allreduce of 8 double precision (64 bytes), 3 times    site:small
!   main:    MPI_Allreduce of 1000 integers (4000 bytes), 5 times       site:large
!            MPI_Send of 25 integers (100 bytes) to rank + 1, 2 times   site:send
!            MPI_Recv of the same from rank - 1, 2 times                site:recv
program f_sites
  use mpi
  implicit none
  integer :: rank, nranks, ierr, i, right, left
  double precision :: small(8), small_out(8)
  integer :: large(1000), large_out(1000), msg(25)

  call MPI_Init(ierr) ! site:init
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nranks, ierr)
  small = 1d0
  large = 2
  msg = rank
  call relax(small, small_out)
  do i = 1, 5
    call MPI_Allreduce(large, large_out, 1000, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr) ! site:large
  end do
  right = mod(rank + 1, nranks)
  left = mod(rank + nranks - 1, nranks)
  do i = 1, 2
    call MPI_Send(msg, 25, MPI_INTEGER, right, 0, MPI_COMM_WORLD, ierr) ! site:send
    call MPI_Recv(msg, 25, MPI_INTEGER, left, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr) ! site:recv
  end do
  call MPI_Finalize(ierr) ! site:finalize

contains

  !> Three sums of 8 values over all ranks.
  subroutine relax(a, b)
    double precision, intent(in) :: a(8)
    double precision, intent(out) :: b(8)
    integer :: j, err
    do j = 1, 3
      call MPI_Allreduce(a, b, 8, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, err) ! site:small
    end do
  end subroutine relax
end program f_sites
