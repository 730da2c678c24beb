/*
 * fortran.h — support for the generated Fortran entry points: finding the
 * MPI library's Fortran PMPI symbol (pmpi_send_, PMPI_SEND, ...) at run time,
 * so that the library links without the MPI Fortran library and C programs
 * never load it.
 */
#ifndef SL_FORTRAN_H
#define SL_FORTRAN_H

#include <mpi.h>

/* Room for a Fortran status (MPI_STATUS_SIZE integers) on the stack. */
#define SL_F_STATUS_MAX (sizeof(MPI_Status) / sizeof(MPI_Fint) + 8)

/*
 * The Fortran PMPI function lower_name ("pmpi_send") under the first
 * mangling the next library defines (lower_name_, lower_name__, UPPER,
 * lower_name), cached in *cache; NULL (with one warning) if none exists.
 */
void *sl_fortran_pmpi(void **cache, const char *lower_name);

#endif /* SL_FORTRAN_H */
