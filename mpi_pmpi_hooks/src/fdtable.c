/*
 * fdtable.c — the sender thread's private descriptor table (see fdtable.h).
 * Runs on the sender thread only, once, when it starts.
 */
#define _GNU_SOURCE
#include "fdtable.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util.h"

#define SL_FDTABLE_MAX_KEEP 4

__thread int sl_tls_fdtable_private __attribute__((tls_model("initial-exec")));
static int app_pidfd = -1; /* this process, in the sender's private table */

/* close_range(first, last, 0), or -1 with ENOSYS where the headers lack it. */
static int sys_close_range(unsigned first, unsigned last)
{
#ifdef SYS_close_range
    return (int)syscall(SYS_close_range, first, last, 0);
#else
    (void)first;
    (void)last;
    errno = ENOSYS;
    return -1;
#endif
}

/* pidfd_open(pid, 0), or -1. */
static int sys_pidfd_open(pid_t pid)
{
#ifdef SYS_pidfd_open
    return (int)syscall(SYS_pidfd_open, pid, 0);
#else
    (void)pid;
    errno = ENOSYS;
    return -1;
#endif
}

/* pidfd_getfd(pidfd, fd, 0): a close-on-exec duplicate of fd of that process, or -1. */
static int sys_pidfd_getfd(int pidfd, int fd)
{
#ifdef SYS_pidfd_getfd
    return (int)syscall(SYS_pidfd_getfd, pidfd, fd, 0);
#else
    (void)pidfd;
    (void)fd;
    errno = ENOSYS;
    return -1;
#endif
}

/* close(2) without the library's wrapper, which would forget the I/O
 * mapping of that number in the application's table (io.h). */
static void raw_close(int fd)
{
    syscall(SYS_close, fd);
}

/* True if the kernel has close_range and pidfd_getfd (probed on the shared table:
 * an empty range, and a duplicate of a pidfd that is closed again at once). */
static int supported(void)
{
    if (sys_close_range(~0u, ~0u) != 0)
        return 0;
    int p = sys_pidfd_open(getpid());
    if (p < 0)
        return 0;
    int q = sys_pidfd_getfd(p, p);
    if (q >= 0)
        raw_close(q);
    raw_close(p);
    return q >= 0;
}

/* Whether the kernel has what a private table needs (sl_fdtable_probe). */
static int probed_support;

/* Checks once, on the calling thread, what sl_fdtable_private needs (see fdtable.h). */
void sl_fdtable_probe(void)
{
    probed_support = supported();
}

/* Closes every descriptor but keep[0..n) (ascending) with close_range; 0 or -1. */
static int close_ranges(const int *keep, int n)
{
    unsigned lo = 0;
    for (int i = 0; i < n; i++) {
        unsigned k = (unsigned)keep[i];
        if (k > lo && sys_close_range(lo, k - 1) != 0)
            return -1;
        lo = k + 1;
    }
    return sys_close_range(lo, ~0u);
}

/* The same by listing /proc/thread-self/fd, if close_range failed after all. */
static int close_listed(const int *keep, int n)
{
    DIR *dir = opendir("/proc/thread-self/fd");
    if (dir == NULL)
        return -1;
    struct dirent *e;
    while ((e = readdir(dir)) != NULL) {
        char *end;
        long fd = strtol(e->d_name, &end, 10);
        int kept = end == e->d_name || *end != '\0' || fd == dirfd(dir);
        for (int i = 0; i < n; i++)
            kept |= fd == keep[i];
        if (!kept)
            raw_close((int)fd);
    }
    closedir(dir);
    return 0;
}

/* Unshares the table, closes what was inherited, fills 0-2 with /dev/null. */
int sl_fdtable_private(const int *keep, int n)
{
    int kept[SL_FDTABLE_MAX_KEEP + 1], nk = 0;
    for (int i = 0; i < n && i < SL_FDTABLE_MAX_KEEP; i++)
        if (keep[i] >= 0)
            kept[nk++] = keep[i];
#if defined(__SANITIZE_ADDRESS__)
    kept[nk++] = 2; /* sanitizer builds: reports of this thread must reach stderr */
#endif
    for (int i = 1; i < nk; i++) /* ascending, for close_ranges */
        for (int j = i; j > 0 && kept[j - 1] > kept[j]; j--) {
            int t = kept[j];
            kept[j] = kept[j - 1];
            kept[j - 1] = t;
        }
    if (!probed_support || unshare(CLONE_FILES) != 0)
        return 0;
    /* From here on, this thread's descriptor numbers are not the application's:
     * the I/O wrappers must not touch its fd maps for them (io.c). */
    sl_tls_fdtable_private = 1;
    if (close_ranges(kept, nk) != 0 && close_listed(kept, nk) != 0)
        sl_warn("the sender thread could not close its copies of the program's descriptors: "
                "files the program closes stay open until it exits");
    for (;;) { /* 0, 1, 2 (those free): never a socket or spool file of ours */
        int fd = open("/dev/null", O_RDWR);
        if (fd < 0)
            break;
        if (fd > 2) {
            raw_close(fd);
            break;
        }
    }
    app_pidfd = sys_pidfd_open(getpid());
    return 1;
}

/* A transient duplicate of the application's fd (its table is the thread-group leader's). */
int sl_fdtable_app_fd(int fd)
{
    return app_pidfd >= 0 ? sys_pidfd_getfd(app_pidfd, fd) : -1;
}
