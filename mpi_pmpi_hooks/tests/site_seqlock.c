/*
 * site_seqlock.c — the sender's reading of a thread's call-site counts while the thread
 * moves them (callsite.h: a cache slot's counts move into its key's row under the block's
 * sequence count), without MPI: linked with the library's callsite.o and keytab.o
 * (tests/hooks/test_callsites.py builds it with the test programs and runs it).
 *
 * A counting thread (counter block 0, depth 1) calls sl_site_count at KEYS call sites
 * (made-up return addresses, more than the cache has slots, so they share slots) in
 * bursts of 1 to 8 calls of one site: the first call of a burst usually takes the slot
 * from another key and moves that key's counts (up to 7) into its row; the others hit.
 * The main thread reads every count (sl_site_load_all, as the sender does) again and
 * again. Each call is `begun` before it is counted and `ended` after, so a reading taken
 * between reading `ended` and reading `begun` must total at least the one and at most
 * the other: a count seen both in a slot and in its row, or in neither, breaks that
 * (x86: loads are not reordered with loads, nor stores with stores).
 *
 * Usage: site_seqlock SECONDS
 * Prints "site_seqlock: N readings, M calls" and exits 0; on the first reading out of
 * bounds prints it and exits 1.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "callsite.h"
#include "core.h"
#include "pyframe.h"

#define KEYS 1024u

/* What callsite.o and keytab.o take from the rest of the library: no mpi4py module, one
 * counter block, the core's dropped-key counter. */
sl_core_state sl_core;
uintptr_t sl_py_lo, sl_py_len;
unsigned sl_py_path(uint64_t *pc, unsigned depth)
{
    (void)pc;
    (void)depth;
    return 0;
}
void sl_py_describe(uint64_t pc, sl_rec_callsite_frame *r)
{
    (void)pc;
    (void)r;
}
unsigned sl_thread_blocks_used(void)
{
    return 1;
}

static uint64_t begun, ended;
static int warm, stop;

/* The return address of site k: distinct, 16-byte aligned, as call instructions' are. */
static const void *site_pc(unsigned k)
{
    return (const void *)(uintptr_t)(0x400000u + 16u * k);
}

static void count_once(unsigned k)
{
    __atomic_fetch_add(&begun, 1, __ATOMIC_SEQ_CST);
    sl_site_count(site_pc(k), SL_SITE_MPI, 0, (uint32_t)SL_BOUND_no_comm, 0, 0);
    __atomic_fetch_add(&ended, 1, __ATOMIC_SEQ_CST);
}

static void *counting(void *arg)
{
    (void)arg;
    sl_site_claim(0);
    for (unsigned k = 0; k < KEYS; k++) /* every key made before the readings begin */
        count_once(k);
    __atomic_store_n(&warm, 1, __ATOMIC_RELEASE);
    unsigned x = 12345u;
    while (!__atomic_load_n(&stop, __ATOMIC_ACQUIRE)) {
        x = x * 1103515245u + 12345u;
        unsigned k = (x >> 8) % KEYS, burst = 1 + (x >> 24) % 8;
        for (unsigned i = 0; i < burst; i++)
            count_once(k);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    double seconds = argc > 1 ? atof(argv[1]) : 1.0;
    if (sl_site_init(1, 2 * KEYS) != 0) {
        fprintf(stderr, "site_seqlock: sl_site_init failed\n");
        return 2;
    }
    pthread_t thread;
    pthread_create(&thread, NULL, counting, NULL);
    while (!__atomic_load_n(&warm, __ATOMIC_ACQUIRE))
        ;
    unsigned n = sl_keytab_count(&sl_sites);
    size_t entries = sl_keytab_entries(&sl_sites);
    uint64_t *out = calloc(entries * SL_SITE_NVALS, sizeof *out);
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    unsigned long readings = 0;
    int bad = 0;
    do {
        uint64_t lo = __atomic_load_n(&ended, __ATOMIC_SEQ_CST);
        sl_site_load_all(out, n);
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
        uint64_t hi = __atomic_load_n(&begun, __ATOMIC_SEQ_CST);
        uint64_t total = 0;
        for (unsigned i = sl_keytab_next(&sl_sites, ~0u, n); i < entries;
             i = sl_keytab_next(&sl_sites, i, n))
            total += out[(size_t)i * SL_SITE_NVALS + SL_SITE_CALLS];
        readings++;
        if (total < lo || total > hi) {
            printf("site_seqlock: reading %lu totals %llu calls, not within [%llu, %llu]\n",
                   readings, (unsigned long long)total, (unsigned long long)lo,
                   (unsigned long long)hi);
            bad = 1;
            break;
        }
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while ((double)(t.tv_sec - t0.tv_sec) + 1e-9 * (double)(t.tv_nsec - t0.tv_nsec) <
             seconds);
    __atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
    pthread_join(thread, NULL);
    if (n != KEYS || sl_keytab_count(&sl_sites) != KEYS) {
        printf("site_seqlock: %u keys, not %u\n", sl_keytab_count(&sl_sites), KEYS);
        return 1;
    }
    if (!bad)
        printf("site_seqlock: %lu readings, %llu calls\n", readings,
               (unsigned long long)__atomic_load_n(&ended, __ATOMIC_SEQ_CST));
    free(out);
    return bad;
}
