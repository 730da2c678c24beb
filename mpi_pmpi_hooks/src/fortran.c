/*
 * fortran.c — run-time lookup of the Fortran PMPI symbols (see fortran.h).
 */
#define _GNU_SOURCE /* RTLD_NEXT */
#include "fortran.h"

#include <ctype.h>
#include <dlfcn.h>
#include <stdio.h>

#include "util.h"

/* Resolves the Fortran PMPI symbol once; later calls read the cache. */
void *sl_fortran_pmpi(void **cache, const char *lower_name)
{
    void *fn = __atomic_load_n(cache, __ATOMIC_ACQUIRE);
    if (fn != NULL)
        return fn;
    char name[96];
    const char *const forms[] = { "%s_", "%s__", "%s", "%s" };
    for (int f = 0; f < 4 && fn == NULL; f++) {
        snprintf(name, sizeof name, forms[f], lower_name);
        if (f == 2)
            for (char *c = name; *c != '\0'; c++)
                *c = (char)toupper((unsigned char)*c);
        fn = dlsym(RTLD_NEXT, name);
    }
    if (fn == NULL)
        sl_warn("no Fortran symbol %s in the MPI library; the call fails", lower_name);
    __atomic_store_n(cache, fn, __ATOMIC_RELEASE);
    return fn;
}
