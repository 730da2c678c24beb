/*
 * io_semantics.c — a standalone (non-MPI) program that checks that tracked
 * POSIX I/O keeps libc's semantics under libstacklens: results and errno of
 * the read/write family, thread cancellation at those calls, and a process
 * whose main thread ends with pthread_exit. argv[1] is the mode, argv[2] a
 * directory.
 *
 *   calls DIR    on DIR/sem.bin (opened O_RDWR|O_CREAT|O_TRUNC), in order:
 *                write 4093 B; pwrite 100 B at 8000; writev 10+20 B;
 *                write from address 1 (EFAULT); pread 50 B at 0; pread at -1
 *                (EINVAL); lseek 0; read 4096 B; readv 100+200 B; pwrite64
 *                7 B at 9000; pread64 7 B at 9000; lseek to the end; read
 *                (0, end of file); then DIR/sem.bin opened O_RDONLY and one
 *                write of 5 B to it (EBADF). Prints one line per call,
 *                "<call> <result> <errno name or 0>".
 *                EXPECTED per file: 2 opens, 6 writes of 4230 bytes (failed
 *                calls count, with 0 bytes), 6 reads of 4453 bytes.
 *   writes DIR N N writes of 4093 bytes to DIR/next.bin.
 *   reuse DIR    descriptors copied and closed behind close(): DIR/stale.bin
 *                gets write 10 B, fcntl F_DUPFD copy write 20 B, F_DUPFD_CLOEXEC
 *                copy write 30 B; close_range closes it and a pipe takes its
 *                number (40 B through the pipe); DIR/stale2.bin gets write
 *                50 B, closefrom closes it and a pipe takes its number (60 B).
 *                EXPECTED: stale.bin 1 open, 3 writes of 60 bytes, no reads;
 *                stale2.bin 1 open, 1 write of 50 bytes, no reads (the pipes'
 *                bytes are not file-system I/O). Status 3 if a pipe did not
 *                get the closed number.
 *   selfcancel DIR  the (only) thread requests its own cancellation, then
 *                writes to DIR/cancel.bin: the write is a cancellation point,
 *                so the cleanup handler runs there and exits with status 42
 *                (status 1 if the write returned).
 *   cancelwriter DIR  a second thread writes 1 byte at a time to
 *                DIR/cancel.bin in a loop with no other cancellation point;
 *                the main thread cancels it after 50 ms and joins it: prints
 *                "canceled" (status 0), status 1 if it was not.
 *   reopen DIR   files opened again and again by one name (DIR absolute), while
 *                what the name leads to changes: DIR/a.bin 5 times (1 B each);
 *                DIR/link/f.bin 3 times (2 B) with DIR/link -> r1, then 2 times
 *                with DIR/link -> r2; DIR/a.bin renamed DIR/b.bin and opened
 *                2 times by the new name, then a new DIR/a.bin once; DIR/s.txt
 *                with fopen 3 times (3 B); after chdir(DIR), rel.bin 2 times
 *                (4 B). Each open writes once and closes.
 *                EXPECTED (POSIX): a.bin 6 opens, 6 writes, 6 B; r1/f.bin 3, 3,
 *                6 B; r2/f.bin 2, 2, 4 B; b.bin 2, 2, 2 B; rel.bin 2, 2, 8 B;
 *                (stdio) s.txt 3 opens, 3 writes, 9 B.
 *   pexit DIR    the main thread writes 3 x 4096 B to DIR/pexit.bin, starts
 *                two threads that each sleep 300 ms and write 2 x 4096 B to
 *                it, and ends with pthread_exit. EXPECTED: status 0 once the
 *                threads end; 1 open, 7 writes, 28672 bytes.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

static char buf[8192];

/* Prints one call's result and errno name ("0" when it succeeded). */
static void report(const char *call, long rc, int err)
{
    const char *name = rc >= 0 ? "0" : err == EFAULT ? "EFAULT" : err == EINVAL ? "EINVAL"
                                      : err == EBADF ? "EBADF" : "other";
    printf("%s %ld %s\n", call, rc, name);
}

#define CALL(name, expr) \
    do { \
        errno = 0; \
        long rc_ = (long)(expr); \
        report(name, rc_, errno); \
    } while (0)

/* Opens DIR/name with flags (mode 0644). */
static int open_in(const char *dir, const char *name, int flags)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return open(path, flags, 0644);
}

static int calls(const char *dir)
{
    int fd = open_in(dir, "sem.bin", O_RDWR | O_CREAT | O_TRUNC);
    if (fd < 0)
        return 1;
    struct iovec wv[2] = { { buf, 10 }, { buf, 20 } };
    struct iovec rv[2] = { { buf, 100 }, { buf + 100, 200 } };
    const void *volatile unmapped = (const void *)1; /* hidden from the compiler's checks */
    CALL("write", write(fd, buf, 4093));
    CALL("pwrite", pwrite(fd, buf, 100, 8000));
    CALL("writev", writev(fd, wv, 2));
    CALL("write", write(fd, unmapped, 10));
    CALL("pread", pread(fd, buf, 50, 0));
    CALL("pread", pread(fd, buf, 10, -1));
    CALL("lseek", lseek(fd, 0, SEEK_SET));
    CALL("read", read(fd, buf, 4096));
    CALL("readv", readv(fd, rv, 2));
    CALL("pwrite64", pwrite64(fd, buf, 7, 9000));
    CALL("pread64", pread64(fd, buf, 7, 9000));
    CALL("lseek", lseek(fd, 0, SEEK_END));
    CALL("read", read(fd, buf, 10));
    int ro = open_in(dir, "sem.bin", O_RDONLY);
    CALL("write", write(ro, buf, 5));
    close(ro);
    close(fd);
    return 0;
}

static int writes(const char *dir, int n)
{
    int fd = open_in(dir, "next.bin", O_WRONLY | O_CREAT | O_TRUNC);
    for (int i = 0; fd >= 0 && i < n; i++)
        if (write(fd, buf, 4093) != 4093)
            return 1;
    return fd >= 0 ? close(fd) : 1;
}

/* Opens `path` n times, each time writing `bytes` bytes and closing it. */
static int open_write_close(const char *path, int n, int bytes)
{
    for (int i = 0; i < n; i++) {
        int fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd < 0 || write(fd, buf, (size_t)bytes) != bytes || close(fd) != 0)
            return 1;
    }
    return 0;
}

static int reopen(const char *dir)
{
    char a[4096], b[4096], f[4096], link[4096], r1[4096], r2[4096], s[4096];
    snprintf(a, sizeof a, "%s/a.bin", dir);
    snprintf(b, sizeof b, "%s/b.bin", dir);
    snprintf(f, sizeof f, "%s/link/f.bin", dir);
    snprintf(link, sizeof link, "%s/link", dir);
    snprintf(r1, sizeof r1, "%s/r1", dir);
    snprintf(r2, sizeof r2, "%s/r2", dir);
    snprintf(s, sizeof s, "%s/s.txt", dir);
    if (open_write_close(a, 5, 1) != 0 || mkdir(r1, 0755) != 0 || mkdir(r2, 0755) != 0
        || symlink("r1", link) != 0 || open_write_close(f, 3, 2) != 0 || unlink(link) != 0
        || symlink("r2", link) != 0 || open_write_close(f, 2, 2) != 0 || rename(a, b) != 0
        || open_write_close(b, 2, 1) != 0 || open_write_close(a, 1, 1) != 0)
        return 1;
    for (int i = 0; i < 3; i++) {
        FILE *stream = fopen(s, "a");
        if (stream == NULL || fwrite(buf, 1, 3, stream) != 3 || fclose(stream) != 0)
            return 1;
    }
    return chdir(dir) != 0 || open_write_close("rel.bin", 2, 4) != 0;
}

/* A pipe whose read end takes the number fd, freed just before; n bytes through it. */
static int pipe_over(int fd, int n)
{
    int p[2];
    if (pipe(p) != 0 || p[0] != fd)
        return 3;
    int ok = write(p[1], buf, (size_t)n) == n && read(p[0], buf, (size_t)n) == n;
    close(p[0]);
    close(p[1]);
    return ok ? 0 : 1;
}

static int reuse(const char *dir)
{
    int fd = open_in(dir, "stale.bin", O_RDWR | O_CREAT | O_TRUNC);
    int d1 = fcntl(fd, F_DUPFD, 100), d2 = fcntl(fd, F_DUPFD_CLOEXEC, 200);
    if (fd < 0 || d1 < 100 || d2 < 200 || write(fd, buf, 10) != 10 || write(d1, buf, 20) != 20
        || write(d2, buf, 30) != 30)
        return 1;
    close(d1);
    close(d2);
    if (close_range((unsigned)fd, (unsigned)fd, 0) != 0)
        return 1;
    int rc = pipe_over(fd, 40);
    fd = open_in(dir, "stale2.bin", O_RDWR | O_CREAT | O_TRUNC);
    if (rc != 0 || fd < 0 || write(fd, buf, 50) != 50)
        return rc != 0 ? rc : 1;
    closefrom(fd);
    return pipe_over(fd, 60);
}

/* Cleanup handler of selfcancel: the cancellation acted. */
static void cancelled(void *arg)
{
    (void)arg;
    _exit(42);
}

static int selfcancel(const char *dir)
{
    int fd = open_in(dir, "cancel.bin", O_WRONLY | O_CREAT | O_TRUNC);
    if (fd < 0)
        return 1;
    int rc = 1;
    pthread_cleanup_push(cancelled, NULL);
    pthread_cancel(pthread_self());
    rc = write(fd, buf, 10) == 10 ? 1 : 2;
    pthread_cleanup_pop(0);
    return rc;
}

/* Body of cancelwriter's thread: writes until cancelled at a write. */
static void *writer(void *arg)
{
    int fd = *(int *)arg;
    for (;;)
        if (pwrite(fd, buf, 1, 0) != 1)
            return NULL;
}

static int cancelwriter(const char *dir)
{
    int fd = open_in(dir, "cancel.bin", O_WRONLY | O_CREAT | O_TRUNC);
    pthread_t t;
    if (fd < 0 || pthread_create(&t, NULL, writer, &fd) != 0)
        return 1;
    struct timespec ts = { 0, 50 * 1000 * 1000 };
    nanosleep(&ts, NULL);
    void *result = NULL;
    if (pthread_cancel(t) != 0 || pthread_join(t, &result) != 0 || result != PTHREAD_CANCELED)
        return 1;
    printf("canceled\n");
    return 0;
}

/* Body of pexit's threads: 300 ms, then 2 x 4 KiB. */
static void *late_writer(void *arg)
{
    int fd = *(int *)arg;
    struct timespec ts = { 0, 300 * 1000 * 1000 };
    nanosleep(&ts, NULL);
    for (int i = 0; i < 2; i++)
        if (write(fd, buf, 4096) != 4096)
            abort();
    return NULL;
}

static int pexit(const char *dir)
{
    static int fd;
    fd = open_in(dir, "pexit.bin", O_WRONLY | O_CREAT | O_TRUNC);
    if (fd < 0)
        return 1;
    for (int i = 0; i < 3; i++)
        if (write(fd, buf, 4096) != 4096)
            return 1;
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        if (pthread_create(&t[i], NULL, late_writer, &fd) != 0)
            return 1;
    pthread_exit(NULL);
}

int main(int argc, char **argv)
{
    if (argc < 3)
        return 2;
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *mode = argv[1], *dir = argv[2];
    if (strcmp(mode, "calls") == 0)
        return calls(dir);
    if (strcmp(mode, "writes") == 0 && argc == 4)
        return writes(dir, atoi(argv[3]));
    if (strcmp(mode, "reuse") == 0)
        return reuse(dir);
    if (strcmp(mode, "selfcancel") == 0)
        return selfcancel(dir);
    if (strcmp(mode, "cancelwriter") == 0)
        return cancelwriter(dir);
    if (strcmp(mode, "pexit") == 0)
        return pexit(dir);
    if (strcmp(mode, "reopen") == 0)
        return reopen(dir);
    return 2;
}
