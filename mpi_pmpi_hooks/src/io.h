/*
 * io.h — file-system I/O per file and layer (wire table 7): the I/O table,
 * the descriptor maps of the POSIX and stdio layers, and the counting API of
 * the POSIX (posix.c), stdio (stdio.c) and MPI-IO (generated) wrappers.
 *
 * A file gets its entry when it is opened outside any MPI call: its key is
 * its layer, its phase (start-up or the program, below), its path (what
 * /proc/self/fd/<fd> names: absolute, symlinks resolved) and its mount point
 * and file-system type (from /proc/self/mountinfo, cached: see io.c); a
 * reopened file finds its entry again. Only regular
 * files count: sockets, pipes, terminals and anything under /proc, /sys and
 * /dev are not file-system I/O and are not tracked. I/O done while the
 * thread is inside an MPI call (MPI_Init, MPI_Finalize, the POSIX calls under
 * MPI-IO, ...) is the MPI runtime's and is not counted; MPI-IO itself is
 * counted at layer 3. Threads that the MPI runtime creates inside MPI calls
 * are marked the same way (see posix.c, pthread_create). In a process an MPI
 * launcher started, I/O before MPI_Init (an interpreter's imports, the
 * loader) is start-up I/O (phase 1), kept apart from the program's (phase
 * 0); at MPI_Init the files still open move to their phase 0 entries.
 * Files beyond STACKLENS_MAX_KEYS fold into one "<other>" entry per layer
 * and phase.
 *
 * The hot path (read, write, ...) is an array lookup fd -> entry, two tick
 * reads (util.h; the *_TIME counters are in ticks) and three adds to the
 * calling thread's own row for the file: every counter block of core.h has
 * one row of SL_IO_NVALS counters (one cache line) per entry of the table,
 * mapped when the block is first claimed (sl_io_block_rows), written with
 * plain loads and stores by its owner only. Threads without a block, opens
 * and closes add to the table's shared counters with relaxed atomic adds
 * (a new file takes the table's mutex once). A reader sums the shared
 * counters and the rows of every block ever claimed (sl_io_load).
 */
#ifndef SL_IO_H
#define SL_IO_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "core.h"
#include "keytab.h"
#include "stacklens_wire.h"

#define SL_MAX_FD 65536 /* descriptors above are not tracked */

/* The layers (enum sl_io_layer: SL_IO_POSIX, SL_IO_STDIO, SL_IO_MPIIO) and
 * SL_IO_LAYER_END come from SL_IO_LAYER in stacklens_wire.def. */

/* Key of an I/O entry, complete before its lookup (zero-filled text fields). */
typedef struct sl_io_key {
    uint32_t layer;
    uint32_t phase;     /* 1 = start-up (before MPI_Init), 0 = the program */
    char path[sizeof(((sl_rec_io *)0)->path)];
    char mount[sizeof(((sl_rec_io *)0)->mount)];
    char fstype[sizeof(((sl_rec_io *)0)->fstype)];
} sl_io_key;

enum {
    SL_IO_OPENS, SL_IO_READS, SL_IO_WRITES, SL_IO_BYTES_READ, SL_IO_BYTES_WRITTEN,
    SL_IO_READ_TIME, SL_IO_WRITE_TIME, SL_IO_META_TIME, SL_IO_NVALS
};

extern sl_keytab sl_io;
extern int sl_io_enabled[SL_IO_LAYER_END];    /* per layer: counting on (set once at start-up) */
extern int32_t *sl_io_fd_map[SL_IO_LAYER_END]; /* [layer]: fd -> entry + 1 (POSIX and stdio) */

/* Sets up the I/O table (max_keys files) and descriptor maps; disabled[layer]:
 * that layer is not counted (STACKLENS_DISABLE); startup: the process waits for
 * MPI_Init, its I/O until then is start-up I/O. 0 or -1. */
int sl_io_init(unsigned max_keys, const int disabled[SL_IO_LAYER_END], int startup);

/* MPI_Init was called: I/O from now on is the program's, and the files
 * still open move to their program entries. */
void sl_io_startup_end(void);

/* True if layer I/O on this thread is the application's and is counted. */
static inline int sl_io_counting(int layer)
{
    return !sl_tls_in_call && sl_io_enabled[layer];
}

/* A descriptor fd was opened at layer (POSIX or stdio) outside MPI, by the name
 * `named` (the open's path argument, or NULL): finds or creates its file entry
 * and counts the open with its time. Returns the entry, or -1 if fd is not a
 * tracked file (then nothing is counted). */
int sl_io_opened(int layer, int fd, uint64_t ticks, const char *named);

/* fd was closed at layer: counts the meta time and forgets the mapping. Returns
 * the entry fd was mapped to, or -1 if it was not a tracked file. */
int sl_io_closed(int layer, int fd, uint64_t ticks);

/* newfd now refers to what oldfd refers to (dup, dup2, dup3, fcntl F_DUPFD). */
void sl_io_dup(int oldfd, int newfd);

/* Descriptors first..last were closed behind the wrappers' backs (close_range,
 * closefrom): both layers forget them. */
void sl_io_forget(unsigned first, unsigned last);

/* Entry of fd at layer, or -1 if the descriptor is not a tracked file. */
static inline int sl_io_entry(int layer, int fd)
{
    const int32_t *map = sl_io_fd_map[layer];
    if ((unsigned)fd >= SL_MAX_FD || map == NULL)
        return -1;
    return __atomic_load_n(&map[fd], __ATOMIC_RELAXED) - 1;
}

/* The I/O rows of counter block i (core.h), mapped at its first claim
 * (MAP_NORESERVE: only the pages of rows written take memory); NULL if the
 * table is not set up or the mapping failed (the thread then adds to the
 * shared counters). Called by sl_thread_claim only. */
uint64_t *sl_io_block_rows(unsigned i);

/* This thread's row of entry e, or NULL: add to the shared counters. */
static inline uint64_t *sl_io_my_row(int e)
{
    if (__builtin_expect(sl_tls_calls == NULL, 0))
        sl_thread_claim();
    uint64_t *rows = sl_tls_io;
    return __builtin_expect(rows != NULL, 1) ? rows + (size_t)e * SL_IO_NVALS : NULL;
}

/* Counts a read (write = 0) or write (write = 1) of bytes on entry e. */
static inline void sl_io_rw(int e, int write, uint64_t bytes, uint64_t ticks)
{
    uint64_t *r = sl_io_my_row(e);
    if (__builtin_expect(r != NULL, 1)) {
        sl_own_add(&r[write ? SL_IO_WRITES : SL_IO_READS], 1);
        sl_own_add(&r[write ? SL_IO_BYTES_WRITTEN : SL_IO_BYTES_READ], bytes);
        sl_own_add(&r[write ? SL_IO_WRITE_TIME : SL_IO_READ_TIME], ticks);
        return;
    }
    uint64_t *v = sl_keytab_vals(&sl_io, (unsigned)e);
    __atomic_fetch_add(&v[write ? SL_IO_WRITES : SL_IO_READS], 1, __ATOMIC_RELAXED);
    if (bytes != 0)
        __atomic_fetch_add(&v[write ? SL_IO_BYTES_WRITTEN : SL_IO_BYTES_READ], bytes,
                           __ATOMIC_RELAXED);
    if (ticks != 0)
        __atomic_fetch_add(&v[write ? SL_IO_WRITE_TIME : SL_IO_READ_TIME], ticks,
                           __ATOMIC_RELAXED);
}

/* Counts meta time (seek, sync, flush, set_view, ...) on entry e. */
static inline void sl_io_meta(int e, uint64_t ticks)
{
    uint64_t *r = sl_io_my_row(e);
    if (__builtin_expect(r != NULL, 1))
        sl_own_add(&r[SL_IO_META_TIME], ticks);
    else
        sl_keytab_add(&sl_io, (unsigned)e, SL_IO_META_TIME, ticks);
}

/* The cumulative counters of entry e: the shared ones plus every block's row
 * (relaxed loads; the sender thread). */
void sl_io_load(unsigned e, uint64_t out[SL_IO_NVALS]);

/* MPI-IO (layer 3), called by the generated wrappers. */
void sl_mpiio_open(MPI_File fh, const char *filename, uint64_t ticks);
void sl_mpiio_close(MPI_File fh, uint64_t ticks);
void sl_mpiio_read(MPI_File fh, uint64_t bytes, uint64_t ticks);
void sl_mpiio_write(MPI_File fh, uint64_t bytes, uint64_t ticks);
void sl_mpiio_meta(MPI_File fh, uint64_t ticks);

#endif /* SL_IO_H */
