/*
 * interpose.h — what the libc file I/O wrappers share: exporting a wrapper from
 * the otherwise hidden library, finding the next (libc's) definition of a
 * wrapped function once, lazily, with dlsym(RTLD_NEXT), and the counting steps
 * the generated wrappers (sl_io_wrappers.c, from contract/io_functions.spec and
 * contract/templates/io_<class>.c.in) are made of. posix.c owns the direct-call
 * switch (sl_direct_io) and the thread wrappers.
 *
 * The helpers of the read/write path are SL_HOT (core.h): inlined into every
 * wrapper (no calls). A call on a tracked file adds two tick reads (util.h) and
 * three adds to the thread's counters; on any other descriptor only an array
 * lookup. Every counted call on a tracked file, opens and closes included, is
 * also counted at its call site (callsite.h: the wrapper's return address, the
 * op its I/O function id SL_IOFN_<name>, no bytes for opens, closes and meta).
 */
#ifndef SL_INTERPOSE_H
#define SL_INTERPOSE_H

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#include "core.h"
#include "io.h"

/* Makes a wrapper visible to the dynamic linker (the library builds hidden). */
#define SL_EXPORT __attribute__((visibility("default")))

/* The next definition of name (libc's), looked up once into *cache. */
static inline void *sl_next_fn(void **cache, const char *name)
{
    void *fn = __atomic_load_n(cache, __ATOMIC_ACQUIRE);
    if (fn == NULL) {
        fn = dlsym(RTLD_NEXT, name);
        __atomic_store_n(cache, fn, __ATOMIC_RELEASE);
    }
    return fn;
}

/* Declares real_<name>, libc's name, with the type of name (cached per wrapper). */
#define SL_NEXT(name) \
    static void *name##_cache; \
    __typeof__(&name) real_##name = (__typeof__(&name))sl_next_fn(&name##_cache, #name)

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

/* 1 while tracked reads and writes make their system calls themselves (posix.c,
 * "Direct calls"); cleared for good at the program's first pthread_cancel. */
extern int sl_direct_io;

/* Counts a POSIX open (I/O function fn, called from site, of the file named `named`)
 * that returned fd after t0: on its file, and at its call site if the file is tracked. */
static inline int sl_fd_opened(int fd, uint64_t t0, unsigned fn, const void *site,
                               const char *named)
{
    if (fd >= 0 && sl_io_counting(SL_IO_POSIX)) {
        int saved = errno;
        uint64_t ticks = sl_ticks_between(t0, sl_ticks());
        if (sl_io_opened(SL_IO_POSIX, fd, ticks, named) >= 0)
            sl_site_count(site, SL_IO_POSIX, fn, (uint32_t)SL_BOUND_no_comm, 0, ticks);
        errno = saved;
    }
    return fd;
}

/* A close (I/O function fn of layer, called from site) of fd that started at t0
 * returned: the mapping is forgotten and the time counted on the file even inside MPI
 * (the number is free again); the call site counts it only when the file was tracked
 * and the call is the application's (outside MPI). errno is kept. */
static inline void sl_fd_closed(int layer, int fd, uint64_t t0, unsigned fn, const void *site)
{
    int saved = errno;
    uint64_t ticks = sl_ticks_between(t0, sl_ticks());
    if (sl_io_closed(layer, fd, ticks) >= 0 && sl_io_counting(layer))
        sl_site_count(site, (unsigned)layer, fn, (uint32_t)SL_BOUND_no_comm, 0, ticks);
    errno = saved;
}

/* Entry of fd if this POSIX call on it is counted, else -1 (then no clock is read). */
static SL_HOT int sl_fd_counted_entry(int fd)
{
    return sl_io_counting(SL_IO_POSIX) ? sl_io_entry(SL_IO_POSIX, fd) : -1;
}

/* Start time of a call on entry e: read only if the call is counted. */
static SL_HOT uint64_t sl_start_time(int e)
{
    return e >= 0 ? sl_ticks() : 0;
}

/* True if a call on entry e is counted and makes its system call itself. */
static SL_HOT int sl_direct(int e)
{
    return e >= 0 && __atomic_load_n(&sl_direct_io, __ATOMIC_RELAXED);
}

/* System call nr with up to four arguments, as glibc's single-thread path
 * makes it: -1 and errno on failure. Inline on x86-64 (no call, so the
 * wrapper keeps its arguments in registers). */
static SL_HOT long sl_direct_call(long nr, long a, long b, long c, long d)
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

/* Counts a read or write of rc bytes on entry e (if >= 0) that started at t0, and the
 * call at its call site (site: the wrapper's return address) as I/O function fn of
 * layer. */
static SL_HOT void sl_rw_done(int e, int write, ssize_t rc, uint64_t t0, unsigned layer,
                              unsigned fn, const void *site)
{
    if (e < 0)
        return;
    uint64_t bytes = rc > 0 ? (uint64_t)rc : 0, ticks = sl_ticks_between(t0, sl_ticks());
    sl_io_rw(e, write, bytes, ticks);
    sl_site_count(site, layer, fn, (uint32_t)SL_BOUND_no_comm, bytes, ticks);
}

/* Counts meta time of a call on entry e (if >= 0) that started at t0, and its call
 * site as for sl_rw_done. */
static SL_HOT void sl_meta_done(int e, uint64_t t0, unsigned layer, unsigned fn,
                                const void *site)
{
    if (e < 0)
        return;
    uint64_t ticks = sl_ticks_between(t0, sl_ticks());
    sl_io_meta(e, ticks);
    sl_site_count(site, layer, fn, (uint32_t)SL_BOUND_no_comm, 0, ticks);
}

/* The descriptor fcntl(fd, cmd, ...) returned (rc) is a copy of fd (F_DUPFD*). */
static inline void sl_fcntl_done(int fd, int cmd, int rc)
{
    if (rc >= 0 && (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC))
        sl_io_dup(fd, rc);
}

/* Counts the open of stream f (I/O function fn, called from site, of the file named
 * `named`, NULL for fdopen) that started at t0: on its file, and at its call site if
 * the file is tracked. glibc's stdio calls its internal read/write/open, never the
 * POSIX wrappers, so stdio I/O is counted once, at layer 2. */
static inline FILE *sl_stream_opened(FILE *f, uint64_t t0, unsigned fn, const void *site,
                                     const char *named)
{
    if (f != NULL && sl_io_counting(SL_IO_STDIO)) {
        int saved = errno;
        uint64_t ticks = sl_ticks_between(t0, sl_ticks());
        if (sl_io_opened(SL_IO_STDIO, fileno(f), ticks, named) >= 0)
            sl_site_count(site, SL_IO_STDIO, fn, (uint32_t)SL_BOUND_no_comm, 0, ticks);
        errno = saved;
    }
    return f;
}

/* Entry of stream f if its I/O is counted, else -1 (then no clock is read). */
static inline int sl_stream_entry(FILE *f)
{
    if (f == NULL || !sl_io_counting(SL_IO_STDIO))
        return -1;
    return sl_io_entry(SL_IO_STDIO, fileno(f));
}

#endif /* SL_INTERPOSE_H */
