/*
 * next_write.c — libnext_write.so, an interposer of write() preloaded after
 * libstacklens (LD_PRELOAD=libstacklens.so:libnext_write.so): it counts the
 * write() calls of exactly 4093 bytes that reach it and prints
 * "next_write: <count>" to stderr at exit. libstacklens must forward every
 * tracked write to it, never past it to the kernel.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <unistd.h>

static unsigned long seen;

ssize_t write(int fd, const void *buf, size_t n)
{
    static ssize_t (*next)(int, const void *, size_t);
    if (next == NULL)
        next = (ssize_t(*)(int, const void *, size_t))dlsym(RTLD_NEXT, "write");
    if (n == 4093)
        __atomic_fetch_add(&seen, 1, __ATOMIC_RELAXED);
    return next(fd, buf, n);
}

__attribute__((destructor)) static void report(void)
{
    fprintf(stderr, "next_write: %lu\n", seen);
}
