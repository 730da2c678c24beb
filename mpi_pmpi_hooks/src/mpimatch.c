/*
 * mpimatch.c — the MPI build mismatch check at library load (see mpimatch.h).
 */
#define _GNU_SOURCE /* RTLD_NEXT, dladdr */
#include "mpimatch.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "util.h"

#ifdef OPEN_MPI
#define BUILT_FOR_OPEN_MPI 1
#else
#define BUILT_FOR_OPEN_MPI 0
#endif

int sl_mpi_mismatch;

/* 1 if the program's MPI library is Open MPI, 0 if not, -1 if it cannot be told. */
static int program_mpi_is_open_mpi(void)
{
    Dl_info info;
    void *init = dlsym(RTLD_NEXT, "PMPI_Init");
    if (init == NULL || dladdr(init, &info) == 0 || info.dli_fname == NULL)
        return -1;
    void *lib = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
    if (lib == NULL)
        return -1;
    int open_mpi = dlsym(lib, "ompi_mpi_comm_world") != NULL;
    dlclose(lib);
    return open_mpi;
}

/* True on the job's first rank, as its launcher numbers it, or if none does. */
static int first_rank(void)
{
    static const char *const vars[] = { "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK",
                                        "SLURM_PROCID" };
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *rank = getenv(vars[i]);
        if (rank != NULL)
            return strcmp(rank, "0") == 0;
    }
    return 1;
}

/* Takes the entries that are this library (path me, resolved) out of LD_PRELOAD;
 * returns how many there were (none: loaded some other way, /etc/ld.so.preload say,
 * where executing the program again would only load it again). */
static int preload_without(const char *me)
{
    const char *preload = getenv("LD_PRELOAD");
    char rest[8192] = "", entry[PATH_MAX], real[PATH_MAX];
    size_t used = 0;
    int removed = 0;
    while (preload != NULL && *preload != '\0') {
        size_t len = strcspn(preload, ": ");
        if (len > 0 && len < sizeof entry) {
            memcpy(entry, preload, len);
            entry[len] = '\0';
            int mine = realpath(entry, real) != NULL && strcmp(real, me) == 0;
            removed += mine;
            if (!mine && used + len + 2 < sizeof rest) {
                used += (size_t)snprintf(rest + used, sizeof rest - used, "%s%s",
                                         used ? ":" : "", entry);
            }
        }
        preload += len + (preload[len] != '\0');
    }
    if (removed == 0)
        return 0;
    if (used)
        setenv("LD_PRELOAD", rest, 1);
    else
        unsetenv("LD_PRELOAD");
    return removed;
}

/* Library constructor, before the others (priority 101): on a mismatch, warn
 * and run the program again without this library. glibc passes the program's
 * arguments to constructors. */
__attribute__((constructor(101))) static void sl_mpi_check(int argc, char **argv, char **envp)
{
    (void)argc;
    (void)envp;
    int saved = errno;
    int open_mpi = program_mpi_is_open_mpi();
    if (open_mpi < 0 || open_mpi == BUILT_FOR_OPEN_MPI) {
        errno = saved;
        return;
    }
    sl_mpi_mismatch = 1;
    Dl_info self;
    char me[PATH_MAX];
    int found = dladdr((void *)sl_mpi_check, &self) && self.dli_fname != NULL
                && realpath(self.dli_fname, me) != NULL;
    const char *ours = BUILT_FOR_OPEN_MPI ? "Open MPI" : "MPICH";
    const char *theirs = open_mpi ? "Open MPI" : "MPICH";
    /* Under `stacklens run` (it names the MPI it chose) the advice is its --mpi option. */
    const char *chosen = sl_env(SL_SET_RUN_MPI);
    const char *advice = chosen != NULL && *chosen != '\0'
                             ? (open_mpi ? "`stacklens run --mpi openmpi` attaches it"
                                         : "`stacklens run --mpi mpich` attaches it")
                             : "`stacklens run` chooses it";
    if (first_rank())
        sl_warn("%s is built for %s but this program uses %s: the job runs unprofiled "
                "(preload the library built for %s; %s)",
                found ? me : "libstacklens.so", ours, theirs, theirs, advice);
    if (found && argv != NULL && preload_without(me) > 0)
        execv("/proc/self/exe", argv);
    errno = saved; /* not executed again: the wrappers stay off (sl_mpi_mismatch) */
}
