/*
 * keytab.c — bounded keyed counter tables (see keytab.h).
 */
#include "keytab.h"

#include <stdlib.h>
#include <string.h>

#include "core.h"

/* Sets up the slots (twice max_keys, a power of two), the entries and the overflow keys. */
int sl_keytab_init(sl_keytab *t, unsigned max_keys, size_t key_size, unsigned nvals,
                   unsigned n_overflow, void (*overflow_key)(void *key, unsigned i))
{
    unsigned n = 16;
    while (n < 2 * max_keys)
        n *= 2;
    memset(t, 0, sizeof *t);
    t->key_size = key_size;
    t->nvals = nvals;
    t->rec_size = ((key_size + 7) & ~(size_t)7) + 8u * nvals;
    t->max_keys = max_keys;
    t->n_overflow = n_overflow;
    t->mask = n - 1;
    t->slots = calloc(n, sizeof *t->slots);
    t->entries = calloc((size_t)max_keys + n_overflow, t->rec_size);
    if (t->slots == NULL || t->entries == NULL) {
        sl_keytab_fini(t);
        return -1;
    }
    for (unsigned i = 0; i < n_overflow; i++)
        overflow_key(sl_keytab_key(t, sl_keytab_overflow(t, i)), i);
    pthread_mutex_init(&t->lock, NULL);
    return 0;
}

/* Frees the slots and entries. */
void sl_keytab_fini(sl_keytab *t)
{
    free(t->slots);
    free(t->entries);
    t->slots = NULL;
    t->entries = NULL;
}

/* Probes for key; returns its entry index, or -1 with *free_slot the first empty slot. */
static int probe(sl_keytab *t, const void *key, uint64_t hash, unsigned *free_slot)
{
    for (unsigned i = (unsigned)(hash >> 17) & t->mask, n = 0; n <= t->mask;
         i = (i + 1) & t->mask, n++) {
        int32_t s = __atomic_load_n(&t->slots[i], __ATOMIC_ACQUIRE);
        if (s == 0) {
            *free_slot = i;
            return -1;
        }
        if (memcmp(sl_keytab_key(t, (unsigned)s - 1), key, t->key_size) == 0)
            return s - 1;
    }
    *free_slot = ~0u;
    return -1;
}

/* Lock-free hit, else insertion under the mutex (or the overflow entry asked for). */
unsigned sl_keytab_get(sl_keytab *t, const void *key, uint64_t hash, unsigned overflow)
{
    unsigned free_slot;
    int i = probe(t, key, hash, &free_slot);
    if (i >= 0)
        return (unsigned)i;
    pthread_mutex_lock(&t->lock);
    i = probe(t, key, hash, &free_slot);
    if (i < 0) {
        unsigned n = t->count;
        if (n >= t->max_keys || free_slot == ~0u) {
            i = (int)sl_keytab_overflow(t, overflow);
            sl_key_dropped();
        } else {
            memcpy(sl_keytab_key(t, n), key, t->key_size);
            __atomic_store_n(&t->count, n + 1, __ATOMIC_RELEASE);
            __atomic_store_n(&t->slots[free_slot], (int32_t)n + 1, __ATOMIC_RELEASE);
            i = (int)n;
        }
    }
    pthread_mutex_unlock(&t->lock);
    return (unsigned)i;
}

/* FNV-1a, 64 bits. */
uint64_t sl_hash_bytes(const void *p, size_t n)
{
    const unsigned char *b = p;
    uint64_t h = 14695981039346656037ull; /* the FNV-1a 64-bit offset basis */
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 1099511628211ull;
    }
    return h;
}

/* Each 8-byte word is folded in by a multiply and a shift (the tail as a word
 * padded with zeros), then the whole is mixed once more so that the low bits a
 * table indexes by depend on every word. */
uint64_t sl_hash_key(const void *p, size_t n)
{
    const unsigned char *b = p;
    uint64_t h = n * 0x9E3779B97F4A7C15ull, w;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        memcpy(&w, b + i, 8);
        h = (h ^ w) * 0xBF58476D1CE4E5B9ull;
        h ^= h >> 29;
    }
    if (i < n) {
        w = 0;
        memcpy(&w, b + i, n - i);
        h = (h ^ w) * 0xBF58476D1CE4E5B9ull;
        h ^= h >> 29;
    }
    h *= 0x94D049BB133111EBull;
    return h ^ (h >> 32);
}
