/*
 * mpimatch.h — does the program's MPI library match the one this build of
 * libstacklens was compiled for?
 *
 * Open MPI and MPICH have different ABIs: an MPI_Comm is a pointer in one and
 * an int in the other. A library built for one, preloaded into a program of
 * the other, hands the program's MPI handles it cannot read ("Invalid
 * communicator" aborts), and a build with int handles even truncates the
 * pointer handles it only forwards. So the check runs when the library is
 * loaded, before the program's main: the library that defines the PMPI_Init
 * after this one is Open MPI if it defines ompi_mpi_comm_world (what
 * MPI_COMM_WORLD points to in Open MPI's ABI), MPICH-like otherwise. On a
 * mismatch the job's first rank prints one warning line, and every process
 * takes this library out of LD_PRELOAD and executes its program again (same
 * pid, arguments and environment otherwise): the job runs as without
 * stacklens, unprofiled. Where that cannot be done (the library was not loaded
 * through LD_PRELOAD, or the exec failed), sl_mpi_mismatch keeps the wrappers
 * from counting from MPI_Init on.
 */
#ifndef SL_MPIMATCH_H
#define SL_MPIMATCH_H

/* 1 if the program's MPI library is not the one of this build (set at load). */
extern int sl_mpi_mismatch;

#endif /* SL_MPIMATCH_H */
