/*
 * posix.c — what the file I/O wrappers need besides the wrappers themselves
 * (those are generated from contract/io_functions.spec into sl_io_wrappers.c,
 * their helpers are in interpose.h): the direct-call switch (sl_direct_io, see
 * "Direct calls" below); pthread_create, which marks threads created from
 * inside an MPI call (the MPI runtime's progress threads) so that their I/O is
 * not the application's; and pthread_cancel, which ends direct calls.
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
#include <gnu/lib-names.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/single_threaded.h>

#include "core.h"
#include "interpose.h"
#include "posix.h"
#include "sl_io_wrappers.h"

/* 1 while tracked reads and writes make their system calls themselves (see
 * "Direct calls" above); cleared for good by direct_io_end. */
int sl_direct_io;

/* Library load: direct calls if glibc sees one thread and every next
 * definition of the family is glibc's own (64-bit offsets in one register). */
__attribute__((constructor)) static void direct_io_init(void)
{
    if (sizeof(long) < sizeof(off64_t) || !__libc_single_threaded)
        return;
    int saved = errno;
    void *libc = dlopen(LIBC_SO, RTLD_LAZY | RTLD_NOLOAD);
    int all = libc != NULL;
    for (unsigned i = 0; all && i < SL_DIRECT_COUNT; i++) {
        void *next = dlsym(RTLD_NEXT, sl_direct_names[i]);
        all = next != NULL && next == dlsym(libc, sl_direct_names[i]);
    }
    if (libc != NULL)
        dlclose(libc);
    __atomic_store_n(&sl_direct_io, all, __ATOMIC_RELAXED);
    errno = saved;
}

/* The program cancels a thread: glibc's own calls from now on. */
static void direct_io_end(void)
{
    __atomic_store_n(&sl_direct_io, 0, __ATOMIC_RELAXED);
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
