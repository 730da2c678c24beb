/*
 * posix.c — the POSIX I/O wrappers: open open64 openat openat64 creat
 * creat64 close read write pread pwrite pread64 pwrite64 readv writev lseek
 * lseek64 fsync fdatasync, counted per file at layer 1 (see io.h); dup
 * dup2 dup3 and fcntl's F_DUPFD, which carry a descriptor's file to its
 * copy; close_range and closefrom, after which the closed numbers are no
 * file's (a pipe or socket may get them next); pthread_create,
 * which marks threads created from inside an MPI call (the MPI runtime's
 * progress threads) so that their I/O is not the application's; and
 * pthread_cancel (see "Direct calls" below).
 *
 * Each wrapper finds the next definition with dlsym(RTLD_NEXT) on first use
 * and forwards to it. A call on a tracked file adds two tick reads (util.h) and
 * three adds to the thread's counters; on any other descriptor only an array
 * lookup.
 *
 * Direct calls. glibc's read, write, pread, pwrite, readv and writev are
 * cancellation points: in a process of one thread they are the bare system
 * call, in a process of several they also switch the thread to asynchronous
 * cancellation around it (two atomic compare-and-swaps on the thread's
 * cancel state). glibc decides with __libc_single_threaded, which the
 * library's own sender thread clears, so a single-threaded program would pay
 * that on every call only because stacklens is attached (about 10-17 ns per
 * 4 KiB write() on tmpfs on the development VM, as much as the counting
 * itself). The switch matters only to a cancellation request, and a request
 * is a pthread_cancel call: until the program's first one (threads the MPI
 * library starts and the program's own threads included), and if
 * __libc_single_threaded was still set when the library was loaded, the
 * tracked calls of that family make the system call themselves, as glibc does
 * in a single-threaded process; a request made while a thread is in such a
 * call acts at its next cancellation point, as if made just after the call.
 * A program with threads of its own pays glibc's switch without stacklens and
 * not with it (~21 ns per tracked 4 KiB write: the counting's two clock reads
 * and no more). Only tracked descriptors (regular files, never a pipe or
 * socket that waits for a peer) take this path; it is taken only if the next
 * definitions of all six (and their 64-bit forms) are glibc's own, so an
 * interposer loaded after stacklens still sees every call; and it ends for
 * good at the first pthread_cancel, before the request is made.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <gnu/lib-names.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <linux/close_range.h>
#include <sys/single_threaded.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#include "core.h"
#include "interpose.h"
#include "io.h"
#include "posix.h"

/* The helpers of the read/write path are SL_HOT (core.h): inlined into every
 * wrapper (no calls). */

/* The mode argument of an open call, if its flags say there is one. */
#define SL_OPEN_MODE(flags, last, mode) \
    do { \
        if ((flags) & (O_CREAT | O_TMPFILE)) { \
            va_list ap; \
            va_start(ap, last); \
            mode = (mode_t)va_arg(ap, int); \
            va_end(ap); \
        } \
    } while (0)

/* Counts an open that returned fd after t0. */
static int opened(int fd, uint64_t t0)
{
    if (fd >= 0 && sl_io_counting(SL_IO_POSIX)) {
        int saved = errno;
        sl_io_opened(SL_IO_POSIX, fd, sl_ticks_between(t0, sl_ticks()));
        errno = saved;
    }
    return fd;
}

/* open(2). */
SL_EXPORT int open(const char *path, int flags, ...)
{
    mode_t mode = 0;
    SL_OPEN_MODE(flags, flags, mode);
    SL_NEXT(open);
    uint64_t t0 = sl_ticks();
    return opened(real_open(path, flags, mode), t0);
}

/* open64(2). */
SL_EXPORT int open64(const char *path, int flags, ...)
{
    mode_t mode = 0;
    SL_OPEN_MODE(flags, flags, mode);
    SL_NEXT(open64);
    uint64_t t0 = sl_ticks();
    return opened(real_open64(path, flags, mode), t0);
}

/* openat(2). */
SL_EXPORT int openat(int dirfd, const char *path, int flags, ...)
{
    mode_t mode = 0;
    SL_OPEN_MODE(flags, flags, mode);
    SL_NEXT(openat);
    uint64_t t0 = sl_ticks();
    return opened(real_openat(dirfd, path, flags, mode), t0);
}

/* openat64(2). */
SL_EXPORT int openat64(int dirfd, const char *path, int flags, ...)
{
    mode_t mode = 0;
    SL_OPEN_MODE(flags, flags, mode);
    SL_NEXT(openat64);
    uint64_t t0 = sl_ticks();
    return opened(real_openat64(dirfd, path, flags, mode), t0);
}

/* creat(2). */
SL_EXPORT int creat(const char *path, mode_t mode)
{
    SL_NEXT(creat);
    uint64_t t0 = sl_ticks();
    return opened(real_creat(path, mode), t0);
}

/* creat64(2). */
SL_EXPORT int creat64(const char *path, mode_t mode)
{
    SL_NEXT(creat64);
    uint64_t t0 = sl_ticks();
    return opened(real_creat64(path, mode), t0);
}

/* close(2): the mapping is forgotten even inside MPI (the fd number is free again). */
SL_EXPORT int close(int fd)
{
    SL_NEXT(close);
    uint64_t t0 = sl_ticks();
    int rc = real_close(fd);
    int saved = errno;
    sl_io_closed(SL_IO_POSIX, fd, sl_ticks_between(t0, sl_ticks()));
    errno = saved;
    return rc;
}

/* Entry of fd if this call on it is counted, else -1 (then no clock is read). */
static SL_HOT int counted_entry(int fd)
{
    return sl_io_counting(SL_IO_POSIX) ? sl_io_entry(SL_IO_POSIX, fd) : -1;
}

/* Start time of a call on entry e: read only if the call is counted. */
static SL_HOT uint64_t start_time(int e)
{
    return e >= 0 ? sl_ticks() : 0;
}

/* 1 while tracked reads and writes make their system calls themselves (see
 * "Direct calls" above); cleared for good by direct_io_end. */
static int direct_io;

/* The calls that may go direct; the next definition of each must be glibc's. */
static const char *const direct_names[] = { "read",    "write",    "pread", "pwrite",
                                            "pread64", "pwrite64", "readv", "writev" };

/* Library load: direct calls if glibc sees one thread and every next
 * definition of the family is glibc's own (64-bit offsets in one register). */
__attribute__((constructor)) static void direct_io_init(void)
{
    if (sizeof(long) < sizeof(off64_t) || !__libc_single_threaded)
        return;
    int saved = errno;
    void *libc = dlopen(LIBC_SO, RTLD_LAZY | RTLD_NOLOAD);
    int all = libc != NULL;
    for (size_t i = 0; all && i < sizeof direct_names / sizeof direct_names[0]; i++) {
        void *next = dlsym(RTLD_NEXT, direct_names[i]);
        all = next != NULL && next == dlsym(libc, direct_names[i]);
    }
    if (libc != NULL)
        dlclose(libc);
    __atomic_store_n(&direct_io, all, __ATOMIC_RELAXED);
    errno = saved;
}

/* The program cancels a thread: glibc's own calls from now on. */
static void direct_io_end(void)
{
    __atomic_store_n(&direct_io, 0, __ATOMIC_RELAXED);
}

/* True if a call on entry e is counted and makes its system call itself. */
static SL_HOT int direct(int e)
{
    return e >= 0 && __atomic_load_n(&direct_io, __ATOMIC_RELAXED);
}

/* System call nr with up to four arguments, as glibc's single-thread path
 * makes it: -1 and errno on failure. Inline on x86-64 (no call, so the
 * wrapper keeps its arguments in registers). */
static SL_HOT long direct_call(long nr, long a, long b, long c, long d)
{
#if defined(__x86_64__)
    register long r10 __asm__("r10") = d;
    long rc;
    __asm__ volatile("syscall"
                     : "=a"(rc)
                     : "0"(nr), "D"(a), "S"(b), "d"(c), "r"(r10)
                     : "rcx", "r11", "memory");
    if ((unsigned long)rc > -4096UL) {
        errno = (int)-rc;
        rc = -1;
    }
    return rc;
#else
    return syscall(nr, a, b, c, d);
#endif
}

/* Counts a read or write of rc bytes on entry e (if >= 0) that started at t0. */
static SL_HOT void rw_done(int e, int write, ssize_t rc, uint64_t t0)
{
    if (e >= 0)
        sl_io_rw(e, write, rc > 0 ? (uint64_t)rc : 0, sl_ticks_between(t0, sl_ticks()));
}

/* read(2). */
SL_EXPORT ssize_t read(int fd, void *buf, size_t n)
{
    SL_NEXT(read);
    int e = counted_entry(fd);
    uint64_t t0 = start_time(e);
    ssize_t rc = direct(e) ? direct_call(SYS_read, fd, (long)buf, (long)n, 0)
                           : real_read(fd, buf, n);
    rw_done(e, 0, rc, t0);
    return rc;
}

/* write(2). */
SL_EXPORT ssize_t write(int fd, const void *buf, size_t n)
{
    SL_NEXT(write);
    int e = counted_entry(fd);
    uint64_t t0 = start_time(e);
    ssize_t rc = direct(e) ? direct_call(SYS_write, fd, (long)buf, (long)n, 0)
                           : real_write(fd, buf, n);
    rw_done(e, 1, rc, t0);
    return rc;
}

/* pread(2). */
SL_EXPORT ssize_t pread(int fd, void *buf, size_t n, off_t off)
{
    SL_NEXT(pread);
    int e = counted_entry(fd);
    uint64_t t0 = start_time(e);
    ssize_t rc = direct(e) ? direct_call(SYS_pread64, fd, (long)buf, (long)n, (long)off)
                           : real_pread(fd, buf, n, off);
    rw_done(e, 0, rc, t0);
    return rc;
}

/* pwrite(2). */
SL_EXPORT ssize_t pwrite(int fd, const void *buf, size_t n, off_t off)
{
    SL_NEXT(pwrite);
    int e = counted_entry(fd);
    uint64_t t0 = start_time(e);
    ssize_t rc = direct(e) ? direct_call(SYS_pwrite64, fd, (long)buf, (long)n, (long)off)
                           : real_pwrite(fd, buf, n, off);
    rw_done(e, 1, rc, t0);
    return rc;
}

/* pread64(2). */
SL_EXPORT ssize_t pread64(int fd, void *buf, size_t n, off64_t off)
{
    SL_NEXT(pread64);
    int e = counted_entry(fd);
    uint64_t t0 = start_time(e);
    ssize_t rc = direct(e) ? direct_call(SYS_pread64, fd, (long)buf, (long)n, (long)off)
                           : real_pread64(fd, buf, n, off);
    rw_done(e, 0, rc, t0);
    return rc;
}

/* pwrite64(2). */
SL_EXPORT ssize_t pwrite64(int fd, const void *buf, size_t n, off64_t off)
{
    SL_NEXT(pwrite64);
    int e = counted_entry(fd);
    uint64_t t0 = start_time(e);
    ssize_t rc = direct(e) ? direct_call(SYS_pwrite64, fd, (long)buf, (long)n, (long)off)
                           : real_pwrite64(fd, buf, n, off);
    rw_done(e, 1, rc, t0);
    return rc;
}

/* readv(2). */
SL_EXPORT ssize_t readv(int fd, const struct iovec *iov, int iovcnt)
{
    SL_NEXT(readv);
    int e = counted_entry(fd);
    uint64_t t0 = start_time(e);
    ssize_t rc = direct(e) ? direct_call(SYS_readv, fd, (long)iov, iovcnt, 0)
                           : real_readv(fd, iov, iovcnt);
    rw_done(e, 0, rc, t0);
    return rc;
}

/* writev(2). */
SL_EXPORT ssize_t writev(int fd, const struct iovec *iov, int iovcnt)
{
    SL_NEXT(writev);
    int e = counted_entry(fd);
    uint64_t t0 = start_time(e);
    ssize_t rc = direct(e) ? direct_call(SYS_writev, fd, (long)iov, iovcnt, 0)
                           : real_writev(fd, iov, iovcnt);
    rw_done(e, 1, rc, t0);
    return rc;
}

/* Counts meta time of a call on entry e (if >= 0) that started at t0. */
static SL_HOT void meta_done(int e, uint64_t t0)
{
    if (e >= 0)
        sl_io_meta(e, sl_ticks_between(t0, sl_ticks()));
}

/* lseek(2). */
SL_EXPORT off_t lseek(int fd, off_t off, int whence)
{
    SL_NEXT(lseek);
    int e = counted_entry(fd);
    uint64_t t0 = start_time(e);
    off_t rc = real_lseek(fd, off, whence);
    meta_done(e, t0);
    return rc;
}

/* lseek64(2). */
SL_EXPORT off64_t lseek64(int fd, off64_t off, int whence)
{
    SL_NEXT(lseek64);
    int e = counted_entry(fd);
    uint64_t t0 = start_time(e);
    off64_t rc = real_lseek64(fd, off, whence);
    meta_done(e, t0);
    return rc;
}

/* fsync(2). */
SL_EXPORT int fsync(int fd)
{
    SL_NEXT(fsync);
    int e = counted_entry(fd);
    uint64_t t0 = start_time(e);
    int rc = real_fsync(fd);
    meta_done(e, t0);
    return rc;
}

/* fdatasync(2). */
SL_EXPORT int fdatasync(int fd)
{
    SL_NEXT(fdatasync);
    int e = counted_entry(fd);
    uint64_t t0 = start_time(e);
    int rc = real_fdatasync(fd);
    meta_done(e, t0);
    return rc;
}

/* dup(2). */
SL_EXPORT int dup(int fd)
{
    SL_NEXT(dup);
    int rc = real_dup(fd);
    if (rc >= 0)
        sl_io_dup(fd, rc);
    return rc;
}

/* dup2(2). */
SL_EXPORT int dup2(int fd, int fd2)
{
    SL_NEXT(dup2);
    int rc = real_dup2(fd, fd2);
    if (rc >= 0 && fd != fd2)
        sl_io_dup(fd, rc);
    return rc;
}

/* dup3(2). */
SL_EXPORT int dup3(int fd, int fd2, int flags)
{
    SL_NEXT(dup3);
    int rc = real_dup3(fd, fd2, flags);
    if (rc >= 0)
        sl_io_dup(fd, rc);
    return rc;
}

/* The descriptor fcntl(fd, cmd, arg) returned (rc) is a copy of fd (F_DUPFD*). */
static void fcntl_done(int fd, int cmd, int rc)
{
    if (rc >= 0 && (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC))
        sl_io_dup(fd, rc);
}

/* fcntl(2): the argument, if cmd takes one, is an int or a pointer; either is
 * passed on in one register-sized slot, as glibc's own fcntl reads it. */
SL_EXPORT int fcntl(int fd, int cmd, ...)
{
    va_list ap;
    va_start(ap, cmd);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    SL_NEXT(fcntl);
    int rc = real_fcntl(fd, cmd, arg);
    fcntl_done(fd, cmd, rc);
    return rc;
}

/* fcntl64(2): fcntl for programs built with 64-bit file offsets. */
SL_EXPORT int fcntl64(int fd, int cmd, ...)
{
    va_list ap;
    va_start(ap, cmd);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    SL_NEXT(fcntl64);
    int rc = real_fcntl64(fd, cmd, arg);
    fcntl_done(fd, cmd, rc);
    return rc;
}

/* close_range(2): the closed numbers are forgotten (no time is counted). */
SL_EXPORT int close_range(unsigned int first, unsigned int last, int flags)
{
    SL_NEXT(close_range);
    int rc = real_close_range(first, last, flags);
    if (rc == 0 && !(flags & CLOSE_RANGE_CLOEXEC))
        sl_io_forget(first, last);
    return rc;
}

/* closefrom(3). */
SL_EXPORT void closefrom(int first)
{
    SL_NEXT(closefrom);
    real_closefrom(first);
    if (first >= 0)
        sl_io_forget((unsigned)first, ~0u);
}

/* A thread start routine and its argument, for runtime-thread marking. */
typedef struct sl_thread_start {
    void *(*fn)(void *);
    void *arg;
} sl_thread_start;

/* Runs a thread created inside an MPI call with the "inside MPI" mark. */
static void *runtime_thread(void *p)
{
    sl_thread_start s = *(sl_thread_start *)p;
    free(p);
    sl_tls_in_call = 1;
    return s.fn(s.arg);
}

/* pthread_create(3): threads started from inside MPI belong to the runtime. */
SL_EXPORT int pthread_create(pthread_t *thread, const pthread_attr_t *attr,
                             void *(*fn)(void *), void *arg)
{
    SL_NEXT(pthread_create);
    sl_thread_start *s = sl_tls_in_call ? malloc(sizeof *s) : NULL;
    if (s == NULL)
        return real_pthread_create(thread, attr, fn, arg);
    s->fn = fn;
    s->arg = arg;
    int rc = real_pthread_create(thread, attr, runtime_thread, s);
    if (rc != 0)
        free(s);
    return rc;
}

/* pthread_cancel(3): ends direct calls before the request is made. */
SL_EXPORT int pthread_cancel(pthread_t thread)
{
    SL_NEXT(pthread_cancel);
    direct_io_end();
    return real_pthread_cancel(thread);
}

int sl_own_thread_create(pthread_t *thread, void *(*fn)(void *))
{
    SL_NEXT(pthread_create);
    return real_pthread_create(thread, NULL, fn, NULL);
}
