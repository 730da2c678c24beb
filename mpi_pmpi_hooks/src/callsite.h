/*
 * callsite.h — call sites: calls, bytes and time of every wrapped MPI, POSIX
 * and stdio call per call site (wire tables callsite and callsite_frame).
 *
 * A call site is a path of return addresses: frame 0 is the wrapper's own
 * return address (the wrappers pass __builtin_return_address(0); for the C,
 * _c and Fortran entry points that is the user's call instruction), frames
 * 1 .. STACKLENS_CALLSITE_DEPTH - 1 its callers (found with _Unwind_Backtrace,
 * only when the depth is above 1). Two bounded keytabs (keytab.h) hold them:
 *   sl_site_paths: path -> site id (the entry index), at most
 *                  STACKLENS_MAX_CALLSITES, then the overflow site;
 *   sl_sites:      (site id, layer, op, communicator, size bucket) -> calls,
 *                  bytes, ticks; at most 4 x that many, then one overflow
 *                  entry per op (site overflow, no communicator, bucket 0).
 * The sender turns each new path into (module, build-id, offset) records on
 * its own thread (dl_iterate_phdr there, never on the call path).
 *
 * Hot path at depth 1 (sl_site_count, core.h): a thread with a counter block
 * (core.h) has a direct-mapped cache of SL_SITE_CACHE slots, each one cache line
 * holding a key (return address, layer, op, communicator, bucket) and that key's
 * counts since the slot took it; a hit is three plain adds into the slot itself,
 * no lock prefix, no call, no pointer chased to a row. The cache pointer is set
 * only at depth 1 and a call from mpi4py's module never gets a slot, so the hot
 * path tests neither. A miss (first call of a key on the thread, or a slot
 * taken by another key) and every call at depth > 1 go through
 * sl_site_count_slow: lock-free lookups, a mutex only when a key is new; it
 * counts the call in the thread's row of the key's sl_sites entry and, at
 * depth 1, takes the slot: the old key's counts move into its row under the
 * block's sequence count (odd while moving), which the sender's reading
 * retries on, so a reading never sees a count in both places or in neither.
 * Threads without a block add atomically into the shared counters. No
 * allocation on the call path after a thread's first call (its block's rows
 * and slots are mapped then, without reserving memory).
 */
#ifndef SL_CALLSITE_H
#define SL_CALLSITE_H

#include <stddef.h>
#include <stdint.h>

#include "keytab.h"
#include "stacklens_wire.h"

/* The layer of a call site's op (wire callsite.layer): the I/O layers keep their
 * SL_IO_LAYER ids. */
enum { SL_SITE_MPI = 0 };

/* Counters of one sl_sites entry. */
enum { SL_SITE_CALLS, SL_SITE_BYTES, SL_SITE_TICKS, SL_SITE_NVALS };

/* Slots of a thread's cache (a power of two). */
#define SL_SITE_CACHE 256u

/* Key of an sl_sites entry. */
typedef struct sl_site_key {
    uint32_t site_id, layer, op, comm_id, bucket, pad;
} sl_site_key;

/* Key of an sl_site_paths entry: depth return addresses, the rest zero. */
typedef struct sl_site_path {
    uint32_t depth, pad;
    uint64_t pc[SL_BOUND_max_site_depth];
} sl_site_path;

/* One slot of a thread's cache, one cache line: the key's return address and the rest
 * of the key packed in tag (sl_site_tag), its counts since the slot took it (only the
 * owning thread writes them; the sender reads them, relaxed) and the sl_sites entry
 * they count for (0 with zero counts while empty). */
typedef struct sl_site_slot {
    const void *pc;
    uint64_t tag;
    uint64_t vals[SL_SITE_NVALS];
    uint32_t entry;
    uint32_t pad[5];
} __attribute__((aligned(64))) sl_site_slot;
_Static_assert(sizeof(sl_site_slot) == 64, "a slot is one cache line");

/* STACKLENS_CALLSITE_DEPTH: 0 = call sites off, 1 .. 8 frames. Set once at load. */
extern unsigned sl_site_depth;
extern sl_keytab sl_sites, sl_site_paths;

/* This thread's cache (its counter block's) at depth 1, or NULL: depth > 1, or no
 * block (then atomic adds). */
extern __thread sl_site_slot *sl_tls_site_cache __attribute__((tls_model("initial-exec")));

/* The cache tag of a key: layer and op, bucket, communicator in one word. */
static inline uint64_t sl_site_tag(unsigned layer, unsigned op, uint32_t comm, unsigned bucket)
{
    return (uint64_t)(layer << 16 | op) << 40 | (uint64_t)bucket << 32 | comm;
}

/* The cache slot of a key. */
static inline unsigned sl_site_slot_of(const void *pc, uint64_t tag)
{
    uint64_t h = ((uint64_t)(uintptr_t)pc ^ tag) * 0x9E3779B97F4A7C15ull;
    return (unsigned)(h >> 56) & (SL_SITE_CACHE - 1);
}

/* Sets up both tables for depth frames and at most max_sites paths, and the sender's
 * scratch for reading the blocks (depth 0: nothing, call sites stay off). Once, at
 * library load. Returns 0, or -1 (no memory: off). */
int sl_site_init(unsigned depth, unsigned max_sites);

/* The thread-side state of counter block b (its rows and cache), mapped at the block's
 * first claim; sets sl_tls_site_cache (NULL when call sites are off, at depth > 1, or
 * when the mapping failed). Called by sl_thread_claim only. */
void sl_site_claim(unsigned b);

/* Thread exit: the thread's cache pointer is dropped (its block goes back to the pool). */
void sl_site_release(void);

/* Counts one call at a key not in this thread's cache (or at depth > 1, or without a
 * block), and at depth 1 gives the key its cache slot unless the call is mpi4py's. */
void sl_site_count_slow(const void *pc, unsigned layer, unsigned op, uint32_t comm,
                        unsigned bucket, uint64_t bytes, uint64_t ticks);

/* Cumulative counters of every sl_sites entry the sender walks with count n (entries
 * [0, n) and the overflow entries: sl_keytab_next) into out (entries x SL_SITE_NVALS;
 * the others are left as they are): the shared ones plus every block's rows and cache
 * slots, each block read consistently (retried while a slot's counts move to a row).
 * One pass; the sender thread only (its scratch is mapped at init). */
void sl_site_load_all(uint64_t *out, unsigned n);

/* The frame records of path entry i (site id i) into out (room for max_site_depth):
 * module, build-id and offset of each return address. Returns its depth. Sender
 * thread only (dl_iterate_phdr). */
unsigned sl_site_describe(unsigned i, sl_rec_callsite_frame *out);

/* The GNU build-id of the process's executable into out (n bytes) as lowercase hex,
 * NUL-padded; empty when it has none. Takes the loader's lock (dl_iterate_phdr): once, at
 * start-up, never on the call path. */
void sl_exe_build_id(char *out, size_t n);

#endif /* SL_CALLSITE_H */
