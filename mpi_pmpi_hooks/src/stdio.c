/*
 * stdio.c — the stdio wrappers: fopen fopen64 fdopen fclose fread fwrite
 * fflush fseek, counted per file at layer 2 (see io.h). glibc's stdio calls
 * its internal read/write/open, never these wrappers' POSIX twins, so stdio
 * I/O is counted once, here.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>

#include "core.h"
#include "interpose.h"
#include "io.h"

/* Counts the open of stream f that started at t0. */
static FILE *opened(FILE *f, uint64_t t0)
{
    if (f != NULL && sl_io_counting(SL_IO_STDIO)) {
        int saved = errno;
        sl_io_opened(SL_IO_STDIO, fileno(f), sl_ticks_between(t0, sl_ticks()));
        errno = saved;
    }
    return f;
}

/* fopen(3). */
SL_EXPORT FILE *fopen(const char *path, const char *mode)
{
    SL_NEXT(fopen);
    uint64_t t0 = sl_ticks();
    return opened(real_fopen(path, mode), t0);
}

/* fopen64(3). */
SL_EXPORT FILE *fopen64(const char *path, const char *mode)
{
    SL_NEXT(fopen64);
    uint64_t t0 = sl_ticks();
    return opened(real_fopen64(path, mode), t0);
}

/* fdopen(3). */
SL_EXPORT FILE *fdopen(int fd, const char *mode)
{
    SL_NEXT(fdopen);
    uint64_t t0 = sl_ticks();
    return opened(real_fdopen(fd, mode), t0);
}

/* fclose(3): closes the descriptor too, so both layers forget it. */
SL_EXPORT int fclose(FILE *f)
{
    SL_NEXT(fclose);
    int fd = f != NULL ? fileno(f) : -1;
    uint64_t t0 = sl_ticks();
    int rc = real_fclose(f);
    int saved = errno;
    uint64_t dt = sl_ticks_between(t0, sl_ticks());
    sl_io_closed(SL_IO_STDIO, fd, dt);
    sl_io_closed(SL_IO_POSIX, fd, 0);
    errno = saved;
    return rc;
}

/* Entry of stream f if its I/O is counted, else -1 (then no clock is read). */
static int entry_of(FILE *f)
{
    if (f == NULL || !sl_io_counting(SL_IO_STDIO))
        return -1;
    return sl_io_entry(SL_IO_STDIO, fileno(f));
}

/* Start time of a call on entry e: read only if the call is counted. */
static inline uint64_t start_time(int e)
{
    return e >= 0 ? sl_ticks() : 0;
}

/* fread(3): bytes = items read x size. */
SL_EXPORT size_t fread(void *buf, size_t size, size_t n, FILE *f)
{
    SL_NEXT(fread);
    int e = entry_of(f);
    uint64_t t0 = start_time(e);
    size_t rc = real_fread(buf, size, n, f);
    if (e >= 0)
        sl_io_rw(e, 0, (uint64_t)rc * size, sl_ticks_between(t0, sl_ticks()));
    return rc;
}

/* fwrite(3): bytes = items written x size. */
SL_EXPORT size_t fwrite(const void *buf, size_t size, size_t n, FILE *f)
{
    SL_NEXT(fwrite);
    int e = entry_of(f);
    uint64_t t0 = start_time(e);
    size_t rc = real_fwrite(buf, size, n, f);
    if (e >= 0)
        sl_io_rw(e, 1, (uint64_t)rc * size, sl_ticks_between(t0, sl_ticks()));
    return rc;
}

/* fflush(3): meta time. */
SL_EXPORT int fflush(FILE *f)
{
    SL_NEXT(fflush);
    int e = entry_of(f);
    uint64_t t0 = start_time(e);
    int rc = real_fflush(f);
    if (e >= 0)
        sl_io_meta(e, sl_ticks_between(t0, sl_ticks()));
    return rc;
}

/* fseek(3): meta time. */
SL_EXPORT int fseek(FILE *f, long off, int whence)
{
    SL_NEXT(fseek);
    int e = entry_of(f);
    uint64_t t0 = start_time(e);
    int rc = real_fseek(f, off, whence);
    if (e >= 0)
        sl_io_meta(e, sl_ticks_between(t0, sl_ticks()));
    return rc;
}
