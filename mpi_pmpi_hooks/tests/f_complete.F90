! f_complete.F90 — a Fortran MPI program with a known pattern of the calls whose
! Fortran bindings Open MPI routes past the C MPI_* functions: request arrays
! (MPI_WAITALL with statuses and with MPI_STATUSES_IGNORE, MPI_WAITANY and
! MPI_WAITSOME, whose indices count from 1), MPI_SENDRECV, persistent requests
! (MPI_SEND_INIT, MPI_RECV_INIT, MPI_STARTALL, MPI_REQUEST_FREE), matched
! probes (MPI_MPROBE, MPI_MRECV) and MPI-IO (MPI_FILE_OPEN,
! MPI_FILE_WRITE_AT_ALL, MPI_FILE_CLOSE). Built twice: with `use mpi` (f_complete) and, with
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
!   4. MPI_IRECV from left, MPI_ISEND of 10+r integers to right, MPI_WAITANY
!      twice;
!   5. MPI_ISEND of 30+r integers to right; MPI_IRECV from left as the second
!      request of an array whose first is MPI_REQUEST_NULL, MPI_WAITSOME on it;
!      MPI_WAIT for the send;
!   6. MPI_SEND of 40+r integers to right; MPI_MPROBE from left, MPI_MRECV;
!   7. FILE opened by all, 100 integers written at offset 400*r
!      (MPI_FILE_WRITE_AT_ALL), closed.
! EXPECTED (4-byte integers): bytes r -> right 4*(100+r) + 3*4*(20+r) +
! 4*(10+r) + 4*(30+r) + 4*(40+r) in 7 messages, r -> left 4*(50+r) in 1; per
! rank MPI_Isend 3 calls 4*(140+3r) bytes, MPI_Irecv 3 calls 4*(140+3*left),
! MPI_Waitall 4 calls, MPI_Waitany 2, MPI_Waitsome 1, MPI_Wait 1, MPI_Sendrecv
! 1 call 4*(50+r), MPI_Send_init 1 call 3*4*(20+r), MPI_Recv_init 1 call
! 3*4*(20+left), MPI_Startall 3 calls, MPI_Request_free 2 calls, MPI_Send 1
! call 4*(40+r), MPI_Mprobe 1, MPI_Mrecv 1 call 4*(40+left), MPI_File_open 1,
! MPI_File_write_at_all 1 call 400 bytes, MPI_File_close 1;
! FILE: one MPI-IO open and one write of 400 bytes per rank, and no other I/O.
program f_complete
#ifdef USE_F08
  use mpi_f08
#define REQUEST type(MPI_Request)
#define MESSAGE type(MPI_Message)
#define FILE_HANDLE type(MPI_File)
#define STATUS_VAR(v) type(MPI_Status) :: v
#define STATUS_ARRAY(v, n) type(MPI_Status) :: v(n)
#define OPT_IERR
#else
  use mpi
#define REQUEST integer
#define MESSAGE integer
#define FILE_HANDLE integer
#define STATUS_VAR(v) integer :: v(MPI_STATUS_SIZE)
#define STATUS_ARRAY(v, n) integer :: v(MPI_STATUS_SIZE, n)
#define OPT_IERR , ierr
#endif
  implicit none
  integer :: ierr, rank, nranks, left, right, it, idx, outcount, indices(2)
  integer :: sbuf(200), rbuf(200), block(100)
  REQUEST :: reqs(2), pers(2)
  MESSAGE :: msg
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

  call MPI_IRECV(rbuf, size(rbuf), MPI_INTEGER, left, 4, MPI_COMM_WORLD, reqs(1), ierr)
  call MPI_ISEND(sbuf, 10 + rank, MPI_INTEGER, right, 4, MPI_COMM_WORLD, reqs(2), ierr)
  do it = 1, 2
    call MPI_WAITANY(2, reqs, idx, st, ierr)
  end do

  call MPI_ISEND(sbuf, 30 + rank, MPI_INTEGER, right, 5, MPI_COMM_WORLD, pers(1), ierr)
  reqs(1) = MPI_REQUEST_NULL
  call MPI_IRECV(rbuf, size(rbuf), MPI_INTEGER, left, 5, MPI_COMM_WORLD, reqs(2), ierr)
  call MPI_WAITSOME(2, reqs, outcount, indices, statuses, ierr)
  call MPI_WAIT(pers(1), st, ierr)

  call MPI_SEND(sbuf, 40 + rank, MPI_INTEGER, right, 6, MPI_COMM_WORLD, ierr)
  call MPI_MPROBE(left, 6, MPI_COMM_WORLD, msg, st, ierr)
  call MPI_MRECV(rbuf, size(rbuf), MPI_INTEGER, msg, st, ierr)

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
