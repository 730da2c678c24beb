! f_sessions.f90 — an MPI-4 sessions program in Fortran (`use mpi`, no MPI_INIT): a
! session, its number of process sets and the name of the first (a string returned
! through the hidden length argument), the group of the mpi://WORLD process set, a communicator made from it, then
! rank 0 sends rank 1 4 messages of 25 integers (100 bytes, MPI_SEND / MPI_RECV) and
! every rank makes 3 MPI_ALLREDUCE of one integer; MPI_COMM_FREE, MPI_SESSION_FINALIZE.
! Run with 2 ranks (MPICH 4: built only where mpi.h is MPI 4).
!
! Expected per rank: MPI_Session_init 1, MPI_Session_get_num_psets 1,
! MPI_Session_get_nth_pset 1, MPI_Group_from_session_pset 1,
! MPI_Comm_create_from_group 1, MPI_Allreduce 3 (12 bytes), MPI_Comm_free 1,
! MPI_Session_finalize 1; rank 0 MPI_Send 4 (400 bytes), rank 1 MPI_Recv 4 (400 bytes).
! Prints "rank R of N: done"; exit status 1 if a sum differs.
program f_sessions
  use mpi
  implicit none
  integer :: session, group, comm, ierr, rank, nranks, i, total, npsets, plen
  character(len=64) :: pname
  integer :: buf(25)
  integer :: status(MPI_STATUS_SIZE)

  call MPI_SESSION_INIT(MPI_INFO_NULL, MPI_ERRORS_ARE_FATAL, session, ierr)
  call MPI_SESSION_GET_NUM_PSETS(session, MPI_INFO_NULL, npsets, ierr)
  plen = len(pname)
  ! MPICH 4.0.2's Fortran binding counts the process sets from 1 (it passes n - 1 to C)
  call MPI_SESSION_GET_NTH_PSET(session, MPI_INFO_NULL, 1, plen, pname, ierr)
  if (npsets < 2 .or. pname(1:6) /= "mpi://") stop 2
  call MPI_GROUP_FROM_SESSION_PSET(session, "mpi://WORLD", group, ierr)
  call MPI_COMM_CREATE_FROM_GROUP(group, "stacklens.f_sessions", MPI_INFO_NULL, &
                                  MPI_ERRORS_ARE_FATAL, comm, ierr)
  call MPI_GROUP_FREE(group, ierr)
  call MPI_COMM_RANK(comm, rank, ierr)
  call MPI_COMM_SIZE(comm, nranks, ierr)
  buf = rank
  do i = 1, 4
    if (rank == 0) then
      call MPI_SEND(buf, 25, MPI_INTEGER, 1, 7, comm, ierr)
    else if (rank == 1) then
      call MPI_RECV(buf, 25, MPI_INTEGER, 0, 7, comm, status, ierr)
    end if
  end do
  do i = 1, 3
    call MPI_ALLREDUCE(1, total, 1, MPI_INTEGER, MPI_SUM, comm, ierr)
  end do
  call MPI_COMM_FREE(comm, ierr)
  call MPI_SESSION_FINALIZE(session, ierr)
  print '(A,I0,A,I0,A)', 'rank ', rank, ' of ', nranks, ': done'
  if (total /= nranks .or. (rank == 1 .and. buf(25) /= 0)) stop 1
end program f_sessions
