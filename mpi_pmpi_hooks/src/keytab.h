/*
 * keytab.h — a bounded table of counter records addressed by a fixed-size
 * key (the coll table: communicator, op, root, size; the I/O table: layer,
 * phase, path, mount, file-system type).
 *
 * A key is complete before it is looked up and never changes once inserted:
 * lookups compare whole keys (memcmp over key_size bytes, so keys must be
 * zero-filled where unused). Entries are appended, never removed, so a key
 * keeps its entry and the sender can read entries [0, sl_keytab_count()) at
 * any time. Lookups are lock-free (open addressing over entry indices,
 * published with release stores); a new key takes the table's mutex once.
 * When max_keys entries exist, a new key folds into one of the table's
 * n_overflow overflow entries (indices max_keys .. max_keys + n_overflow - 1,
 * the caller says which: e.g. one per op, one per I/O layer), whose keys
 * are set at init and are valid records of the wire table; sl_key_dropped()
 * counts each fold.
 */
#ifndef SL_KEYTAB_H
#define SL_KEYTAB_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

typedef struct sl_keytab {
    size_t key_size;      /* bytes of a key (compared with memcmp) */
    size_t rec_size;      /* bytes of an entry: key_size rounded up + nvals counters */
    unsigned nvals;       /* 64-bit counters per entry */
    unsigned max_keys;
    unsigned n_overflow;  /* overflow entries after the max_keys ordinary ones */
    unsigned count;       /* entries in use (atomic), the overflow entries excluded */
    unsigned mask;        /* slots - 1 */
    int32_t *slots;       /* entry index + 1, 0 = empty */
    unsigned char *entries; /* max_keys + n_overflow entries */
    pthread_mutex_t lock;
} sl_keytab;

/*
 * Allocates t for max_keys keys of key_size bytes with nvals counters each,
 * plus n_overflow overflow entries whose keys overflow_key(key, i) writes
 * (into a zeroed key area). Returns 0 or -1 (no memory).
 */
int sl_keytab_init(sl_keytab *t, unsigned max_keys, size_t key_size, unsigned nvals,
                   unsigned n_overflow, void (*overflow_key)(void *key, unsigned i));

/* Frees t. */
void sl_keytab_fini(sl_keytab *t);

/*
 * Entry index of key (hash: any mix of the whole key), inserting it if new;
 * when the table is full, the overflow entry number overflow (counted as a
 * dropped key).
 */
unsigned sl_keytab_get(sl_keytab *t, const void *key, uint64_t hash, unsigned overflow);

/* Index of overflow entry number i. */
static inline unsigned sl_keytab_overflow(const sl_keytab *t, unsigned i)
{
    return t->max_keys + i;
}

/* All entries, ordinary and overflow (0 if the table is not set up). */
static inline size_t sl_keytab_entries(const sl_keytab *t)
{
    return t->entries != NULL ? (size_t)t->max_keys + t->n_overflow : 0;
}

/* Entries in use, the overflow entries not included. */
static inline unsigned sl_keytab_count(const sl_keytab *t)
{
    return __atomic_load_n(&t->count, __ATOMIC_ACQUIRE);
}

/* The entry a reader visits after i, given count = sl_keytab_count(t): the
 * ordinary entries in use, then every overflow entry. A walk starts at
 * sl_keytab_next(t, ~0u, count) and ends at sl_keytab_entries(t). */
static inline unsigned sl_keytab_next(const sl_keytab *t, unsigned i, unsigned count)
{
    i++;
    return i == count && i < t->max_keys ? t->max_keys : i;
}

/* The key area of entry i. */
static inline void *sl_keytab_key(const sl_keytab *t, unsigned i)
{
    return t->entries + (size_t)i * t->rec_size;
}

/* The counters of entry i. */
static inline uint64_t *sl_keytab_vals(const sl_keytab *t, unsigned i)
{
    return (uint64_t *)(t->entries + (size_t)i * t->rec_size + (t->rec_size - 8u * t->nvals));
}

/* Relaxed atomic add to counter v of entry i. */
static inline void sl_keytab_add(sl_keytab *t, unsigned i, unsigned v, uint64_t n)
{
    if (n != 0)
        __atomic_fetch_add(&sl_keytab_vals(t, i)[v], n, __ATOMIC_RELAXED);
}

/* FNV-1a 64 of n bytes, one round per byte: the same value in every process and
 * library build (job and run ids, the tails of shortened names). */
uint64_t sl_hash_bytes(const void *p, size_t n);

/* A hash of a long key of n bytes for sl_keytab_get (the I/O table's 424-byte
 * file keys, looked up on every open): eight bytes per round, ~5x fewer cycles
 * than sl_hash_bytes; its values are for this process's tables only. */
uint64_t sl_hash_key(const void *p, size_t n);

/* A hash of a key of two 64-bit words for sl_keytab_get (the collective keys,
 * looked up on every collective call): a few multiplies and shifts instead of
 * FNV-1a's round per byte (~100 instructions for 16 bytes). */
static inline uint64_t sl_hash_words2(uint64_t a, uint64_t b)
{
    uint64_t h = (a ^ (b * 0x9E3779B97F4A7C15ull)) * 0xBF58476D1CE4E5B9ull;
    h ^= h >> 31;
    h *= 0x94D049BB133111EBull;
    return h ^ (h >> 29);
}

#endif /* SL_KEYTAB_H */
