! f_complete.F90 — a Fortran MPI program with a known pattern of the calls whose
! Fortran bindings Open MPI routes past the C MPI_* functions: request arrays
! (MPI_WAITALL with statuses and with MPI_STATUSES_IGNORE), MPI_SENDRECV,
! persistent requests (MPI_SEND_INIT, MPI_RECV_INIT, MPI_STARTALL,
! MPI_REQUEST_FREE) and MPI-IO (MPI_FILE_OPEN, MPI_FILE_WRITE_AT_ALL,
! MPI_FILE_CLOSE). Built twice: with `use mpi` (f_complete) and, with
! -DUSE_F08, with `use mpi_f08` (f08_complete), where ierror is left out of the
! persistent-request calls (optional there).
!
! Usage: f_complete FILE    (any number of ranks >= 3; FILE is written)
! Rank r, right = r+1 and left = r-1 (mod size):
!   1. MPI_IRECV from left, MPI_ISEND of 100+r integers to right, MPI_WAITALL;
!   2. MPI_SENDRECV: 50+r integers to left, received from right (status ignored);
!   3. a persistent send of 20+r integers to right and receive from left,
!      started 3 times (MPI_STARTALL, MPI_WAITALL with MPI_STATUSES_IGNORE),
!      both freed (MPI_REQUEST_FREE);
!   4. FILE opened by all, 100 integers written at offset 400*r
!      (MPI_FILE_WRITE_AT_ALL), closed.
! EXPECTED (4-byte integers): bytes r -> right 4*(100+r) + 3*4*(20+r) in 4
! messages, r -> left 4*(50+r) in 1; per rank MPI_Isend 1 call 4*(100+r)
! bytes, MPI_Irecv 1 call 4*(100+left), MPI_Waitall 4 calls, MPI_Sendrecv 1
! call 4*(50+r), MPI_Send_init 1 call 3*4*(20+r), MPI_Recv_init 1 call
! 3*4*(20+left), MPI_Startall 3 calls, MPI_Request_free 2 calls,
! MPI_File_open 1, MPI_File_write_at_all 1 call 400 bytes, MPI_File_close 1;
! FILE: one MPI-IO open and one write of 400 bytes per rank, and no other I/O.
program f_complete
#ifdef USE_F08
  use mpi_f08
#define REQUEST type(MPI_Request)
#define FILE_HANDLE type(MPI_File)
#define STATUS_VAR(v) type(MPI_Status) :: v
#define STATUS_ARRAY(v, n) type(MPI_Status) :: v(n)
#define OPT_IERR
#else
  use mpi
#define REQUEST integer
#define FILE_HANDLE integer
#define STATUS_VAR(v) integer :: v(MPI_STATUS_SIZE)
#define STATUS_ARRAY(v, n) integer :: v(MPI_STATUS_SIZE, n)
#define OPT_IERR , ierr
#endif
  implicit none
  integer :: ierr, rank, nranks, left, right, it
  integer :: sbuf(200), rbuf(200), block(100)
  REQUEST :: reqs(2), pers(2)
  FILE_HANDLE :: fh
  STATUS_VAR(st)
  STATUS_ARRAY(statuses, 2)
  integer(kind=MPI_OFFSET_KIND) :: offset
  character(len=1024) :: path

  call get_command_argument(1, path)
  call MPI_INIT(ierr)
  call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
  call MPI_COMM_SIZE(MPI_COMM_WORLD, nranks, ierr)
  right = mod(rank + 1, nranks)
  left = mod(rank + nranks - 1, nranks)
  sbuf = rank

  call MPI_IRECV(rbuf, size(rbuf), MPI_INTEGER, left, 1, MPI_COMM_WORLD, reqs(1), ierr)
  call MPI_ISEND(sbuf, 100 + rank, MPI_INTEGER, right, 1, MPI_COMM_WORLD, reqs(2), ierr)
  call MPI_WAITALL(2, reqs, statuses, ierr)

  call MPI_SENDRECV(sbuf, 50 + rank, MPI_INTEGER, left, 2, rbuf, size(rbuf), MPI_INTEGER, &
                    right, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)

  call MPI_SEND_INIT(sbuf, 20 + rank, MPI_INTEGER, right, 3, MPI_COMM_WORLD, pers(1) OPT_IERR)
  call MPI_RECV_INIT(rbuf, size(rbuf), MPI_INTEGER, left, 3, MPI_COMM_WORLD, pers(2) OPT_IERR)
  do it = 1, 3
    call MPI_STARTALL(2, pers OPT_IERR)
    call MPI_WAITALL(2, pers, MPI_STATUSES_IGNORE OPT_IERR)
  end do
  call MPI_REQUEST_FREE(pers(1) OPT_IERR)
  call MPI_REQUEST_FREE(pers(2) OPT_IERR)

  block = rank
  offset = int(rank, MPI_OFFSET_KIND) * 400
  ! The name is passed with its trailing blanks, as Fortran strings are.
  call MPI_FILE_OPEN(MPI_COMM_WORLD, path, MPI_MODE_CREATE + MPI_MODE_WRONLY, MPI_INFO_NULL, &
                     fh, ierr)
  call MPI_FILE_WRITE_AT_ALL(fh, offset, block, 100, MPI_INTEGER, st, ierr)
  call MPI_FILE_CLOSE(fh, ierr)

  call MPI_FINALIZE(ierr)
  if (rank == 0) print '(a)', 'f_complete: done'
end program f_complete
