/*
 * mpiio.c — MPI-IO on one shared file, DIR/suite-mpiio.dat (DIR: argv[1]); see suite.h
 * for what it prints. Rank r: MPI_File_write_at of 100 bytes at 100 r,
 * MPI_File_write_at_all of 200 bytes at 1000 + 200 r, MPI_File_iwrite_at of 50 bytes at
 * 3000 + 50 r (MPI_Wait), MPI_File_sync, then MPI_File_read_at and MPI_File_read_at_all
 * of the same ranges and MPI_File_iread_at (MPI_Wait), a view starting at 4000 + 64 r
 * (MPI_File_set_view) with MPI_File_write_all and MPI_File_read_all of 64 bytes around an
 * MPI_File_seek back to 0; MPI_File_open and MPI_File_close. Payload bytes: count x type,
 * as asked.
 */
#include "suite.h"

int main(int argc, char **argv)
{
    int rank, size;
    suite_init(&argc, &argv, &rank, &size);
    char path[4096];
    snprintf(path, sizeof path, "%s/suite-mpiio.dat", argc > 1 ? argv[1] : ".");
    MPI_File fh;
    MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh);
    suite_count("MPI_File_open", 0);
    char w[256], r[256];
    memset(w, 'a' + rank, sizeof w);
    MPI_Status st;
    MPI_Request req;

    MPI_File_write_at(fh, 100 * rank, w, 100, MPI_BYTE, &st);
    suite_count("MPI_File_write_at", 100);
    MPI_File_write_at_all(fh, 1000 + 200 * rank, w, 200, MPI_BYTE, &st);
    suite_count("MPI_File_write_at_all", 200);
    MPI_File_iwrite_at(fh, 3000 + 50 * rank, w, 50, MPI_BYTE, &req);
    suite_count("MPI_File_iwrite_at", 50);
    MPI_Wait(&req, &st);
    suite_count("MPI_Wait", 0);
    MPI_File_sync(fh);
    suite_count("MPI_File_sync", 0);
    MPI_Barrier(MPI_COMM_WORLD);
    suite_count("MPI_Barrier", 0);
    MPI_File_sync(fh);
    suite_count("MPI_File_sync", 0);

    MPI_File_read_at(fh, 100 * rank, r, 100, MPI_BYTE, &st);
    suite_count("MPI_File_read_at", 100);
    suite_check(r[0] == 'a' + rank && r[99] == 'a' + rank, "read_at");
    MPI_File_read_at_all(fh, 1000 + 200 * ((rank + 1) % size), r, 200, MPI_BYTE, &st);
    suite_count("MPI_File_read_at_all", 200);
    suite_check(r[199] == 'a' + (rank + 1) % size, "read_at_all of the next rank's");
    MPI_File_iread_at(fh, 3000 + 50 * rank, r, 50, MPI_BYTE, &req);
    suite_count("MPI_File_iread_at", 50);
    MPI_Wait(&req, &st);
    suite_count("MPI_Wait", 0);
    suite_check(r[49] == 'a' + rank, "iread_at");

    MPI_File_set_view(fh, 4000 + 64 * rank, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL);
    suite_count("MPI_File_set_view", 0);
    MPI_File_write_all(fh, w, 64, MPI_BYTE, &st);
    suite_count("MPI_File_write_all", 64);
    MPI_File_seek(fh, 0, MPI_SEEK_SET);
    suite_count("MPI_File_seek", 0);
    memset(r, 0, sizeof r);
    MPI_File_read_all(fh, r, 64, MPI_BYTE, &st);
    suite_count("MPI_File_read_all", 64);
    suite_check(r[63] == 'a' + rank, "read_all");
    MPI_File_close(&fh);
    suite_count("MPI_File_close", 0);
    return suite_end();
}
