! f_abort.f90 — aborter.c in Fortran (`use mpi`), for the Fortran entry point
! of MPI_Abort: every rank calls MPI_BARRIER 40 times, then rank 1 calls
! MPI_ABORT(MPI_COMM_WORLD, 5) while the others wait in MPI_RECV.
! EXPECTED: rank 1 stored aborted with error code 5, its 40 barriers and one
! MPI_Abort call; the job aborted; no rank left running.
program f_abort
  use mpi
  implicit none
  integer :: ierr, rank, i, x
  integer :: status(MPI_STATUS_SIZE)

  call MPI_INIT(ierr)
  call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
  do i = 1, 40
    call MPI_BARRIER(MPI_COMM_WORLD, ierr)
  end do
  if (rank == 1) call MPI_ABORT(MPI_COMM_WORLD, 5, ierr)
  call MPI_RECV(x, 1, MPI_INTEGER, 1, 99, MPI_COMM_WORLD, status, ierr)
  call MPI_FINALIZE(ierr)
end program f_abort
