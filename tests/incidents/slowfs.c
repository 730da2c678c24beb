/* tests/incidents/slowfs.c — a slow file system, for the I/O victim tests: an LD_PRELOAD
 * library that makes every write to a file under $SLOWFS_DIR (and every read, with
 * SLOWFS_READS=1) take $SLOWFS_DELAY_US microseconds longer, as a file system slowed by
 * another job's load would: the calling thread blocks inside the call (nanosleep) and the
 * data is then written as usual. Other files, pipes and sockets are untouched.
 *
 * Preloaded after the hook library (LD_PRELOAD=libstacklens.so:libslowfs.so), it sits
 * where the C library does for the program's own calls (the hooks time them, delay
 * included) and for those an MPI-IO layer makes inside MPI_File_* (ROMIO, OMPIO: the MPI
 * call's time includes the delay). The calls delayed are counted per process and written
 * with the delay to $SLOWFS_REPORT/delayed.<pid> at exit (when set), so a test knows
 * exactly how many calls were slowed and by how much. Never fails the call: with no
 * directory set it only forwards. */
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

static char slow_dir[PATH_MAX];
static size_t slow_len;
static long delay_us;
static int slow_reads;
static unsigned long delayed_calls;

__attribute__((constructor)) static void slowfs_init(void)
{
    const char *dir = getenv("SLOWFS_DIR"), *us = getenv("SLOWFS_DELAY_US");
    const char *reads = getenv("SLOWFS_READS");
    if (dir == NULL || us == NULL || strlen(dir) + 2 >= sizeof slow_dir)
        return;
    snprintf(slow_dir, sizeof slow_dir, "%s/", dir);
    slow_len = strlen(slow_dir);
    delay_us = atol(us);
    slow_reads = reads != NULL && reads[0] == '1';
}

__attribute__((destructor)) static void slowfs_report(void)
{
    const char *report = getenv("SLOWFS_REPORT");
    if (slow_len == 0 || report == NULL)
        return;
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/delayed.%d", report, (int)getpid());
    FILE *f = fopen(path, "w");
    if (f != NULL) {
        fprintf(f, "%lu %ld\n", delayed_calls, delay_us);
        fclose(f);
    }
}

/* Whether fd is a file under the slow directory (its path from /proc/self/fd). */
static int slow_fd(int fd)
{
    if (slow_len == 0 || fd < 0)
        return 0;
    char link[64], target[PATH_MAX];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    int saved = errno;
    ssize_t n = readlink(link, target, sizeof target - 1);
    errno = saved;
    return n > (ssize_t)slow_len && strncmp(target, slow_dir, slow_len) == 0;
}

/* The slow file system's extra latency for one call on fd. */
static void slow_down(int fd, int reading)
{
    if ((reading && !slow_reads) || !slow_fd(fd))
        return;
    int saved = errno;
    struct timespec t = { .tv_sec = delay_us / 1000000, .tv_nsec = (delay_us % 1000000) * 1000 };
    while (nanosleep(&t, &t) != 0 && errno == EINTR) {
    }
    __atomic_add_fetch(&delayed_calls, 1, __ATOMIC_RELAXED);
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
