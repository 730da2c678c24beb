/*
 * handles.h — cache of what stacklens knows about an MPI handle: for a
 * communicator its id, size and the world rank of every rank (the remote
 * group of an intercommunicator), for a window the world ranks of its group,
 * for an MPI-IO file its entry in the I/O table.
 *
 * Lookups are lock-free (open addressing; a slot's key is published after
 * its record); an insertion (first use of a handle) or a removal (Comm_free,
 * Win_free, File_close) takes a mutex. A removed record is freed at once:
 * only a program that uses a handle while freeing it on another thread could
 * see it, and that program is erroneous.
 *
 * Communicator id (the coll table's comm_id, the same on every member):
 * FNV-1a over the world ranks of the group in rank order (for an
 * intercommunicator the XOR of the local and remote group hashes, so both
 * sides agree), mixed with an ordinal: the number of communicators with the
 * same group this process already has in the cache. MPI_COMM_WORLD is cached
 * first and so has ordinal 0; a duplicate of it gets ordinal 1 on every
 * member as long as the members first use their communicators in the same
 * order (the usual case). Freed communicators give their ordinal back, so a
 * dup/free loop keeps one id; a communicator made another way (another creating
 * call, parent or call site: family.c) that would take a freed one's id is given
 * another (sl_comm_set_id), so the freed one's figures keep its description.
 * 0xFFFFFFFF is never an id (the overflow key).
 */
#ifndef SL_HANDLES_H
#define SL_HANDLES_H

#include <mpi.h>
#include <stdint.h>

/* What a handle is; part of the cache key (handles of two kinds may collide). */
enum sl_handle_kind { SL_H_COMM = 1, SL_H_WIN = 2, SL_H_FILE = 3 };

typedef struct sl_handle_rec {
    uint32_t comm_id;   /* communicators: the id described above */
    uint32_t group_hash;
    int size;           /* ranks in world[] */
    int io_index;       /* files: entry in the I/O table */
    uint32_t made;      /* communicators: creating calls made from it so far (family.h) */
    int *world;         /* rank -> world rank (-1 outside MPI_COMM_WORLD) */
} sl_handle_rec;

/* The handle value as a cache key (pointer or integer handles alike). */
#define SL_HKEY(h) ((uintptr_t)(h))

/* Allocates the cache with room for max_keys handles; 0 or -1 (no memory). */
int sl_handles_init(unsigned max_keys);

/* Frees every record and the cache. */
void sl_handles_fini(void);

/* Moves (an atomic add) whenever a communicator's record is removed or changes its id
 * (under the cache's mutex) and when the cache is made again (sl_handles_init): what a
 * cache keyed by communicator handle (family.c) kept from a record is stale once it
 * moved. */
extern unsigned sl_comm_recs_gen;

/* The record of communicator comm, created at its first use; NULL if the
 * cache is full (the key is counted as dropped) or MPI cannot describe it. */
const sl_handle_rec *sl_comm_rec(MPI_Comm comm);

/* Gives communicator comm the id `id` instead of the one its group and ordinal gave it;
 * only while comm's creating call runs (no other use of it yet). No-op without a record. */
void sl_comm_set_id(MPI_Comm comm, uint32_t id);

/* Counts one creating call (split, dup, ...) on comm and returns how many came
 * before it; 0 if comm has no record. */
uint32_t sl_comm_next_made(MPI_Comm comm);

/* The record of window win (its group's world ranks); NULL as above. */
const sl_handle_rec *sl_win_rec(MPI_Win win);

/* Remembers that MPI-IO file fh counts into I/O entry io_index. */
void sl_file_remember(MPI_File fh, int io_index);

/* The I/O entry of fh, or -1 if unknown. */
int sl_file_lookup(MPI_File fh);

/* Forgets a handle (its value may be reused by MPI for a new object). */
void sl_handle_forget(int kind, uintptr_t key);

#endif /* SL_HANDLES_H */
