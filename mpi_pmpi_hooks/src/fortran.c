/*
 * fortran.c — run-time lookup of the Fortran symbols and the Fortran status,
 * request-array and string conversions of the generated Fortran entry points
 * (see fortran.h).
 */
#define _GNU_SOURCE /* RTLD_NEXT */
#include "fortran.h"

#include <ctype.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* Resolves the Fortran symbol once; later calls read the cache. */
void *sl_fortran_symbol(void **cache, const char *name)
{
    void *fn = __atomic_load_n(cache, __ATOMIC_ACQUIRE);
    if (fn != NULL)
        return fn;
    char mangled[96];
    const char *const forms[] = { "%s_", "%s__", "%s", "%s" };
    for (int f = 0; f < 4 && fn == NULL; f++) {
        snprintf(mangled, sizeof mangled, forms[f], name);
        if (f == 2)
            for (char *c = mangled; *c != '\0'; c++)
                *c = (char)toupper((unsigned char)*c);
        fn = dlsym(RTLD_NEXT, mangled);
    }
    if (fn == NULL)
        sl_warn("no Fortran symbol %s in the MPI library; the call fails", name);
    __atomic_store_n(cache, fn, __ATOMIC_RELEASE);
    return fn;
}

/* MPICH's `use mpi_f08` has status sentinels of its own; Open MPI's f08
 * layer uses those of mpif.h. */
#ifdef MPICH_VERSION
#define F08_STATUS_IGNORE   ((const MPI_Fint *)MPI_F08_STATUS_IGNORE)
#define F08_STATUSES_IGNORE ((const MPI_Fint *)MPI_F08_STATUSES_IGNORE)
#else
#define F08_STATUS_IGNORE   ((const MPI_Fint *)MPI_F_STATUS_IGNORE)
#define F08_STATUSES_IGNORE ((const MPI_Fint *)MPI_F_STATUSES_IGNORE)
#endif

int sl_f_status_ignore(const MPI_Fint *st)
{
    return st == MPI_F_STATUS_IGNORE || st == F08_STATUS_IGNORE;
}

int sl_f_statuses_ignore(const MPI_Fint *st)
{
    return st == MPI_F_STATUSES_IGNORE || st == F08_STATUSES_IGNORE;
}

const MPI_Status *sl_f_status(const MPI_Fint *f, MPI_Status *c)
{
    if (sl_f_status_ignore(f) || PMPI_Status_f2c(f, c) != MPI_SUCCESS)
        return NULL;
    return c;
}

MPI_Fint *sl_f_statuses(sl_reqscan *s, int n, MPI_Fint *statuses)
{
    if (s->n == 0 || !sl_f_statuses_ignore(statuses) || n <= 0)
        return statuses;
    MPI_Fint *own = malloc((size_t)n * SL_F_STATUS_SIZE * sizeof *own);
    if (own == NULL)
        return statuses; /* not counted */
    s->statuses = own;
    return own;
}

void sl_f_reqs_complete(sl_reqscan *s, int i, const MPI_Fint *st)
{
    MPI_Status c;
    const MPI_Status *read = sl_f_status(st, &c);
    if (read != NULL)
        sl_reqs_complete(s, i, read);
}

void sl_f_reqs_complete_all(sl_reqscan *s, const MPI_Fint *statuses)
{
    if (sl_f_statuses_ignore(statuses))
        return;
    for (int k = 0; k < s->n; k++)
        sl_f_reqs_complete(s, s->index[k], statuses + (size_t)s->index[k] * SL_F_STATUS_SIZE);
}

const char *sl_f_string(char *out, size_t cap, const char *s, size_t len)
{
    while (len > 0 && s[len - 1] == ' ')
        len--;
    if (len > cap - 1)
        len = cap - 1;
    memcpy(out, s, len);
    out[len] = '\0';
    return out;
}
