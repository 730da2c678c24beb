/* tests/incidents/slowfs.c — a slow file system, for the I/O victim and stall tests: an
 * LD_PRELOAD library that makes every write to a file under a slow directory (and every
 * read, with SLOWFS_READS=1) take longer, as a file system slowed by another job's load
 * would: the calling thread blocks inside the call (nanosleep) and the data is then
 * written as usual. Other files, pipes and sockets are untouched.
 *
 * SLOWFS_DIR names the slow directories (up to SLOWFS_MAX, separated by ':') and
 * SLOWFS_DELAY_US the microseconds each adds (as many, in the same order): a file under
 * the first directory that holds it gets that directory's delay.
 *
 * Preloaded after the hook library (LD_PRELOAD=libstacklens.so:libslowfs.so), it sits
 * where the C library does for the program's own calls (the hooks time them, delay
 * included) and for those an MPI-IO layer makes inside MPI_File_* (ROMIO, OMPIO: the MPI
 * call's time includes the delay). The calls delayed are counted per process and
 * directory and written to $SLOWFS_REPORT/delayed.<pid> at exit (when set), a line
 * "<calls> <delay us>" per directory in order, so a test knows exactly how many calls
 * were slowed and by how much. Never fails the call: with no directory set it only
 * forwards. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define SLOWFS_MAX 4

/* The slow directories (each with a trailing '/'), their delays and their calls delayed. */
static struct slow {
    char dir[PATH_MAX];
    size_t len;
    long delay_us;
    unsigned long delayed_calls;
} slow[SLOWFS_MAX];
static int slow_n;
static int slow_reads;

__attribute__((constructor)) static void slowfs_init(void)
{
    const char *dirs = getenv("SLOWFS_DIR"), *us = getenv("SLOWFS_DELAY_US");
    const char *reads = getenv("SLOWFS_READS");
    if (dirs == NULL || us == NULL)
        return;
    while (slow_n < SLOWFS_MAX && *dirs != '\0' && *us != '\0') {
        size_t n = strcspn(dirs, ":");
        if (n == 0 || n + 2 > sizeof slow[0].dir)
            return;
        struct slow *s = &slow[slow_n++];
        snprintf(s->dir, sizeof s->dir, "%.*s/", (int)n, dirs);
        s->len = n + 1;
        char *end;
        s->delay_us = strtol(us, &end, 10);
        dirs += n + (dirs[n] == ':');
        us = end + (*end == ':');
    }
    slow_reads = reads != NULL && reads[0] == '1';
}

__attribute__((destructor)) static void slowfs_report(void)
{
    const char *report = getenv("SLOWFS_REPORT");
    if (slow_n == 0 || report == NULL)
        return;
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/delayed.%d", report, (int)getpid());
    FILE *f = fopen(path, "w");
    if (f != NULL) {
        for (int i = 0; i < slow_n; i++)
            fprintf(f, "%lu %ld\n", __atomic_load_n(&slow[i].delayed_calls, __ATOMIC_RELAXED),
                    slow[i].delay_us);
        fclose(f);
    }
}

/* The slow directory fd's file is under (its path from /proc/self/fd), or NULL. */
static struct slow *slow_fd(int fd)
{
    if (slow_n == 0 || fd < 0)
        return NULL;
    char link[64], target[PATH_MAX];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    int saved = errno;
    ssize_t n = readlink(link, target, sizeof target - 1);
    errno = saved;
    for (int i = 0; i < slow_n; i++)
        if (n > (ssize_t)slow[i].len && strncmp(target, slow[i].dir, slow[i].len) == 0)
            return &slow[i];
    return NULL;
}

/* The slow file system's extra latency for one call on fd. */
static void slow_down(int fd, int reading)
{
    struct slow *s;
    if ((reading && !slow_reads) || (s = slow_fd(fd)) == NULL)
        return;
    int saved = errno;
    struct timespec t = { .tv_sec = s->delay_us / 1000000,
                          .tv_nsec = (s->delay_us % 1000000) * 1000 };
    while (nanosleep(&t, &t) != 0 && errno == EINTR) {
    }
    __atomic_add_fetch(&s->delayed_calls, 1, __ATOMIC_RELAXED);
    errno = saved;
}

#define NEXT(name)                                                   \
    static __typeof__(name) *next_##name;                            \
    if (next_##name == NULL)                                         \
        next_##name = (__typeof__(name) *)dlsym(RTLD_NEXT, #name)

ssize_t write(int fd, const void *buf, size_t n)
{
    NEXT(write);
    slow_down(fd, 0);
    return next_write(fd, buf, n);
}

ssize_t pwrite(int fd, const void *buf, size_t n, off_t off)
{
    NEXT(pwrite);
    slow_down(fd, 0);
    return next_pwrite(fd, buf, n, off);
}

ssize_t pwrite64(int fd, const void *buf, size_t n, off64_t off)
{
    NEXT(pwrite64);
    slow_down(fd, 0);
    return next_pwrite64(fd, buf, n, off);
}

ssize_t writev(int fd, const struct iovec *iov, int n)
{
    NEXT(writev);
    slow_down(fd, 0);
    return next_writev(fd, iov, n);
}

ssize_t pwritev(int fd, const struct iovec *iov, int n, off_t off)
{
    NEXT(pwritev);
    slow_down(fd, 0);
    return next_pwritev(fd, iov, n, off);
}

ssize_t pwritev64(int fd, const struct iovec *iov, int n, off64_t off)
{
    NEXT(pwritev64);
    slow_down(fd, 0);
    return next_pwritev64(fd, iov, n, off);
}

ssize_t read(int fd, void *buf, size_t n)
{
    NEXT(read);
    slow_down(fd, 1);
    return next_read(fd, buf, n);
}

ssize_t pread(int fd, void *buf, size_t n, off_t off)
{
    NEXT(pread);
    slow_down(fd, 1);
    return next_pread(fd, buf, n, off);
}

ssize_t pread64(int fd, void *buf, size_t n, off64_t off)
{
    NEXT(pread64);
    slow_down(fd, 1);
    return next_pread64(fd, buf, n, off);
}
