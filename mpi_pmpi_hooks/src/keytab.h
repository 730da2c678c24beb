/*
 * keytab.h — a bounded table of counter records addressed by a fixed-size
 * key (the coll table: communicator, op, root; the I/O table: layer, path).
 *
 * Entries are appended, never removed, so a key keeps its entry and the
 * sender can read entries [0, sl_keytab_count()) at any time. Lookups are
 * lock-free (open addressing over entry indices, published with release
 * stores); a new key takes the table's mutex once. When max_keys entries
 * exist, new keys fold into the overflow entry (index max_keys, key set by
 * sl_keytab_init) and sl_key_dropped() counts each fold.
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
    unsigned count;       /* entries in use (atomic), the overflow entry excluded */
    unsigned mask;        /* slots - 1 */
    int32_t *slots;       /* entry index + 1, 0 = empty */
    unsigned char *entries; /* (max_keys + 1) entries */
    pthread_mutex_t lock;
} sl_keytab;

/*
 * Allocates t for max_keys keys of key_size bytes with nvals counters each;
 * overflow_key is the key of the overflow entry. Returns 0 or -1 (no memory).
 */
int sl_keytab_init(sl_keytab *t, unsigned max_keys, size_t key_size, unsigned nvals,
                   const void *overflow_key);

/* Frees t. */
void sl_keytab_fini(sl_keytab *t);

/*
 * Entry index of key (hash: any mix of the key), inserting it if new;
 * fill, if not NULL, is called under the lock to complete a new entry's key
 * area (e.g. the mount of a file) before it is published.
 */
unsigned sl_keytab_get(sl_keytab *t, const void *key, uint64_t hash,
                       void (*fill)(void *key_area, void *arg), void *arg);

/* Entries in use, the overflow entry (index max_keys) not included. */
static inline unsigned sl_keytab_count(const sl_keytab *t)
{
    return __atomic_load_n(&t->count, __ATOMIC_ACQUIRE);
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

/* FNV-1a 64 of n bytes: a hash for sl_keytab_get. */
uint64_t sl_hash_bytes(const void *p, size_t n);

#endif /* SL_KEYTAB_H */
