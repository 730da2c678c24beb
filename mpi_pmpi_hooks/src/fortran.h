/*
 * fortran.h — support for the generated Fortran entry points.
 *
 * Each wrapped function with a Fortran binding gets, from
 * contract/templates/fortran_entry.c.in, one body (counting from the Fortran
 * arguments, converted with PMPI_*_f2c) and these entry points:
 *   mpi_send_, mpi_send__, MPI_SEND, mpi_send   `mpif.h` and `use mpi`; they call
 *       the MPI library's Fortran PMPI symbol (pmpi_send_, ...);
 *   mpi_send_f08_                               `use mpi_f08`;
 *   mpi_send_f08ts_ (MPICH builds)              `use mpi_f08` routines with a choice
 *       buffer, which MPICH names so (TS 29113 descriptors);
 * the f08 ones call the next definition of the same symbol (the MPI library's
 * own; MPICH names its f08 PMPI routines pmpir_*) and take an optional ierror
 * (NULL when the program leaves it out).
 * Why all of them: Open MPI's Fortran layers (mpif.h, use mpi, use mpi_f08)
 * call PMPI_* directly, and so do MPICH's f08 routines without a choice buffer
 * (mpi_waitall_f08_, mpi_init_f08_, ...): the C MPI_* wrappers never see those
 * calls. Where a Fortran routine does call the C MPI_* function (MPICH's
 * mpif.h layer, its f08ts routines), the C wrapper finds the thread already
 * inside a wrapper and only forwards, so nothing is counted twice.
 * The Fortran symbols are found at run time, so the library links without the
 * MPI Fortran libraries and C programs never load them.
 */
#ifndef SL_FORTRAN_H
#define SL_FORTRAN_H

#include <mpi.h>
#include <stddef.h>

#include "requests.h"

/* MPICH only: the <name>_f08ts_ entry points (see above). */
#ifdef MPICH_VERSION
#define SL_F08TS_ENTRY_POINTS 1
#else
#define SL_F08TS_ENTRY_POINTS 0
#endif

/* Integers in a Fortran status (MPI_STATUS_SIZE): the C status's size in both
 * MPICH (5, MPI_F_STATUS_SIZE) and Open MPI (6). The f08 type(MPI_Status) has
 * the same layout in both. */
#ifdef MPI_F_STATUS_SIZE
#define SL_F_STATUS_SIZE MPI_F_STATUS_SIZE
#else
#define SL_F_STATUS_SIZE ((int)(sizeof(MPI_Status) / sizeof(MPI_Fint)))
#endif

/* Which symbol an entry point forwards to: the Fortran PMPI one, or the next
 * definition of its own f08 / f08ts name. */
enum sl_f_form { SL_F_PMPI, SL_F_F08, SL_F_F08TS, SL_F_FORMS };

/*
 * The first index that Waitany, Testany, Waitsome and Testsome of form return:
 * 1, as Fortran counts, except through MPICH 4.0's mpi_f08 (0; a bug of MPICH
 * 4.0, pmodels/mpich#6270, fixed in 4.1). Decided by the MPICH version the
 * library is built with.
 */
static inline int sl_f_index_base(int form)
{
#if defined(MPICH_NUMVERSION) && MPICH_NUMVERSION >= 40000000 && MPICH_NUMVERSION < 40100000
    if (form != SL_F_PMPI)
        return 0;
#endif
    (void)form;
    return 1;
}

/*
 * The Fortran function name ("pmpi_send", "mpi_send_f08") under the first
 * mangling the next library defines (name_, name__, NAME, name), cached in
 * *cache; NULL (with one warning) if none exists.
 */
void *sl_fortran_symbol(void **cache, const char *name);

/* True if st is MPI_STATUS_IGNORE of `use mpi` or of `use mpi_f08`. */
int sl_f_status_ignore(const MPI_Fint *st);

/* True if st is MPI_STATUSES_IGNORE of `use mpi` or of `use mpi_f08`. */
int sl_f_statuses_ignore(const MPI_Fint *st);

/* The Fortran status f converted into *c; c, or NULL if it cannot be read. */
const MPI_Status *sl_f_status(const MPI_Fint *f, MPI_Status *c);

/* statuses, or (if they are ignored and the scan found tracked requests) an
 * array of n Fortran statuses that sl_reqs_release frees. */
MPI_Fint *sl_f_statuses(sl_reqscan *s, int n, MPI_Fint *statuses);

/* Request i (from 0) of the scanned array completed with the Fortran status st. */
void sl_f_reqs_complete(sl_reqscan *s, int i, const MPI_Fint *st);

/* All tracked requests completed, with the Fortran statuses array (Waitall, Testall). */
void sl_f_reqs_complete_all(sl_reqscan *s, const MPI_Fint *statuses);

/* The Fortran string s of len characters as a C string in out (cap bytes),
 * trailing blanks dropped (cut at cap - 1); returns out. */
const char *sl_f_string(char *out, size_t cap, const char *s, size_t len);

#endif /* SL_FORTRAN_H */
