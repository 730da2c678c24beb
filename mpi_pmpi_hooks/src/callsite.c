/*
 * callsite.c — call-site tables (see callsite.h): the slow path of the
 * counting, the blocks' rows and caches, and the description of each path
 * (module, build-id, offset) for the sender.
 */
#define _GNU_SOURCE /* dl_iterate_phdr */
#include "callsite.h"

#include <elf.h>
#include <link.h>
#include <stdio.h>
#include <string.h>
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>
#include <unwind.h>

#include "core.h"
#include "pyframe.h"
#include "sl_io_wrappers.h"

unsigned sl_site_depth;
sl_keytab sl_sites, sl_site_paths;
__thread sl_site_slot *sl_tls_site_cache __attribute__((tls_model("initial-exec")));

/* A counter block's call-site state (the block's owner writes it, the sender reads it):
 * its rows (sl_sites entries x SL_SITE_NVALS), its cache, and the sequence count that is
 * odd while a slot's counts move into a row (slot_take). hold is the sender's: 1 asks the
 * owner to take no slot until its reading is through (so the reading ends). */
typedef struct sl_site_block {
    uint64_t *rows;
    sl_site_slot *cache;
    unsigned seq;
    unsigned hold;
} __attribute__((aligned(64))) sl_site_block;
static sl_site_block blocks[SL_THREAD_BLOCKS];
/* This thread's block, NULL: none (atomic adds into the shared counters). */
static __thread sl_site_block *tls_block __attribute__((tls_model("initial-exec")));

/* The sender's copy of one block (block_load): the rows, each slot's counts and entry. */
static struct {
    uint64_t *rows;  /* sl_sites entries x SL_SITE_NVALS */
    uint64_t *vals;  /* SL_SITE_CACHE x SL_SITE_NVALS */
    uint32_t *entry; /* SL_SITE_CACHE */
} scratch;

/* Readings of a block retried before the sender sets its hold. */
#define SL_SITE_READ_TRIES 4u

/* Overflow entry i of sl_sites: MPI op i, then I/O function i - SL_OP_COUNT. */
static void site_overflow_key(void *key, unsigned i)
{
    sl_site_key *k = key;
    k->site_id = SL_BOUND_overflow_site;
    k->comm_id = SL_BOUND_no_comm;
    if (i < SL_OP_COUNT) {
        k->layer = SL_SITE_MPI;
        k->op = i;
    } else {
        k->op = i - SL_OP_COUNT;
        k->layer = sl_iofn_layers[k->op];
    }
}

/* The one overflow path (its entry index is not a site id: sites beyond it count
 * under overflow_site). */
static void path_overflow_key(void *key, unsigned i)
{
    (void)i;
    ((sl_site_path *)key)->depth = 0;
}

int sl_site_init(unsigned depth, unsigned max_sites)
{
    if (depth == 0)
        return 0;
    if (sl_keytab_init(&sl_site_paths, max_sites, sizeof(sl_site_path), 0, 1,
                       path_overflow_key) != 0)
        return -1;
    if (sl_keytab_init(&sl_sites, 4u * max_sites, sizeof(sl_site_key), SL_SITE_NVALS,
                       SL_OP_COUNT + SL_IOFN_COUNT, site_overflow_key) != 0) {
        sl_keytab_fini(&sl_site_paths);
        return -1;
    }
    size_t rows = sl_keytab_entries(&sl_sites) * SL_SITE_NVALS * sizeof(uint64_t);
    size_t vals = SL_SITE_CACHE * SL_SITE_NVALS * sizeof(uint64_t);
    void *p = mmap(NULL, rows + vals + SL_SITE_CACHE * sizeof(uint32_t),
                   PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
        sl_keytab_fini(&sl_sites);
        sl_keytab_fini(&sl_site_paths);
        return -1;
    }
    scratch.rows = p;
    scratch.vals = (uint64_t *)(void *)((char *)p + rows);
    scratch.entry = (uint32_t *)(void *)((char *)p + rows + vals);
    sl_site_depth = depth;
    return 0;
}

void sl_site_claim(unsigned b)
{
    tls_block = NULL;
    sl_tls_site_cache = NULL;
    if (sl_site_depth == 0 || b >= SL_THREAD_BLOCKS)
        return;
    sl_site_block *blk = &blocks[b];
    if (__atomic_load_n(&blk->rows, __ATOMIC_ACQUIRE) == NULL) {
        /* Only the thread holding block b gets here: no race on its mapping. */
        size_t rows = sl_keytab_entries(&sl_sites) * SL_SITE_NVALS * sizeof(uint64_t);
        rows = (rows + sizeof(sl_site_slot) - 1) & ~(sizeof(sl_site_slot) - 1);
        size_t size = rows + SL_SITE_CACHE * sizeof(sl_site_slot);
        void *p = mmap(NULL, size, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED)
            return;
        blk->cache = (sl_site_slot *)(void *)((char *)p + rows); /* a slot a cache line */
        __atomic_store_n(&blk->rows, (uint64_t *)p, __ATOMIC_RELEASE);
    }
    tls_block = blk;
    if (sl_site_depth == 1)
        sl_tls_site_cache = blk->cache;
}

void sl_site_release(void)
{
    tls_block = NULL;
    sl_tls_site_cache = NULL;
}

/* Walks the stack of the calling thread for _Unwind_Backtrace. */
typedef struct sl_walk {
    uint64_t pc[SL_BOUND_max_site_depth + 16];
    unsigned n;
} sl_walk;

static _Unwind_Reason_Code walk_frame(struct _Unwind_Context *ctx, void *arg)
{
    sl_walk *w = arg;
    if (w->n >= sizeof w->pc / sizeof w->pc[0])
        return _URC_END_OF_STACK;
    w->pc[w->n++] = (uint64_t)_Unwind_GetIP(ctx);
    return _URC_NO_REASON;
}

/* The path of up to depth frames from return address pc up the calling thread's
 * stack: pc, then its callers (pc alone if the walk does not find it); a call from
 * mpi4py's module: the thread's Python frames (pyframe.h), else pc. */
static void path_of(const void *pc, sl_site_path *path)
{
    memset(path, 0, sizeof *path);
    path->depth = 1;
    path->pc[0] = (uint64_t)(uintptr_t)pc;
    if (sl_py_call(pc)) {
        unsigned n = sl_py_path(path->pc, sl_site_depth);
        path->depth = n != 0 ? n : 1;
        if (n == 0)
            path->pc[0] = (uint64_t)(uintptr_t)pc;
        return;
    }
    if (sl_site_depth < 2)
        return;
    sl_walk w;
    w.n = 0;
    _Unwind_Backtrace(walk_frame, &w);
    for (unsigned i = 0; i < w.n; i++) {
        if (w.pc[i] != path->pc[0])
            continue;
        unsigned d = 0;
        while (d < sl_site_depth && i + d < w.n && w.pc[i + d] != 0) {
            path->pc[d] = w.pc[i + d];
            d++;
        }
        path->depth = d;
        return;
    }
}

/* Site id of a path: its entry, or overflow_site beyond the bound. The hash mixes the
 * path's frames a word at a time (the frames beyond its depth are zero): a few
 * multiplies per frame instead of a round per byte of the whole key. */
static uint32_t site_of(const sl_site_path *path)
{
    uint64_t h = sl_hash_words2(path->depth, path->pc[0]);
    for (unsigned f = 1; f < path->depth && f < SL_BOUND_max_site_depth; f++)
        h = sl_hash_words2(h, path->pc[f]);
    unsigned i = sl_keytab_get(&sl_site_paths, path, h, 0);
    return i < sl_site_paths.max_keys ? i : (uint32_t)SL_BOUND_overflow_site;
}

/* Gives slot s of this thread's block blk to key (pc, tag) of sl_sites entry i, with
 * zero counts: the counts of the key it held move into that key's row first. All under
 * the block's sequence count: odd first, then (release fence) the stores, then even
 * (release), so a reading that sees any of the stores sees a changed count when it reads
 * the count again (block_load). Not while the sender holds the block: the key stays
 * uncached, its calls take the slow path. */
static void slot_take(sl_site_block *blk, sl_site_slot *s, const void *pc, uint64_t tag,
                      unsigned i)
{
    if (__atomic_load_n(&blk->hold, __ATOMIC_RELAXED))
        return;
    unsigned seq = blk->seq; /* only this thread writes it */
    __atomic_store_n(&blk->seq, seq + 1, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    uint64_t *row = blk->rows + (size_t)s->entry * SL_SITE_NVALS;
    for (int f = 0; f < SL_SITE_NVALS; f++) {
        sl_own_add(&row[f], s->vals[f]);
        __atomic_store_n(&s->vals[f], 0, __ATOMIC_RELAXED);
    }
    s->pc = pc;
    s->tag = tag;
    __atomic_store_n(&s->entry, i, __ATOMIC_RELAXED);
    __atomic_store_n(&blk->seq, seq + 2, __ATOMIC_RELEASE);
}

void sl_site_count_slow(const void *pc, unsigned layer, unsigned op, uint32_t comm,
                        unsigned bucket, uint64_t bytes, uint64_t ticks)
{
    if (sl_sites.entries == NULL)
        return;
    sl_site_path path;
    path_of(pc, &path);
    sl_site_key key = { .site_id = site_of(&path), .layer = layer, .op = op,
                        .comm_id = comm, .bucket = bucket };
    uint64_t w[3];
    memcpy(w, &key, sizeof w);
    unsigned overflow = layer == SL_SITE_MPI ? op : SL_OP_COUNT + op;
    unsigned i = sl_keytab_get(&sl_sites, &key, sl_hash_words2(w[0], w[1] ^ w[2]), overflow);
    sl_site_block *blk = tls_block;
    if (blk == NULL) {
        sl_keytab_add(&sl_sites, i, SL_SITE_CALLS, 1);
        sl_keytab_add(&sl_sites, i, SL_SITE_BYTES, bytes);
        sl_keytab_add(&sl_sites, i, SL_SITE_TICKS, ticks);
        return;
    }
    uint64_t *row = blk->rows + (size_t)i * SL_SITE_NVALS;
    sl_own_add(&row[SL_SITE_CALLS], 1);
    sl_own_add(&row[SL_SITE_BYTES], bytes);
    sl_own_add(&row[SL_SITE_TICKS], ticks);
    /* Set at depth 1 only. A call from mpi4py's module (found at MPI start; it makes no
     * file call of its own before) never takes a slot: a hit is never mpi4py's. */
    sl_site_slot *cache = sl_tls_site_cache;
    if (cache != NULL && !sl_py_call(pc)) {
        uint64_t tag = sl_site_tag(layer, op, comm, bucket);
        slot_take(blk, &cache[sl_site_slot_of(pc, tag)], pc, tag, i);
    }
}

/* Relaxed copy of the counters of the entries the sender walks with count n from rows
 * (entries x SL_SITE_NVALS) into to. */
static void rows_copy(uint64_t *to, const uint64_t *rows, unsigned n)
{
    size_t total = sl_keytab_entries(&sl_sites);
    for (unsigned i = sl_keytab_next(&sl_sites, ~0u, n); i < total;
         i = sl_keytab_next(&sl_sites, i, n))
        for (size_t f = (size_t)i * SL_SITE_NVALS; f < (size_t)(i + 1) * SL_SITE_NVALS; f++)
            to[f] = __atomic_load_n(&rows[f], __ATOMIC_RELAXED);
}

/* Copies block blk's rows of the entries walked with count n and, at depth 1, its slots'
 * counts and entries into the scratch, as of one moment between slot takes: read the
 * sequence count (odd: a take is under way, again), copy, read it again, again if it
 * changed. After a few tries the owner is asked to hold its takes until the copy is
 * through. Returns 0 if the block has no rows. */
static int block_load(sl_site_block *blk, unsigned n)
{
    const uint64_t *rows = __atomic_load_n(&blk->rows, __ATOMIC_ACQUIRE);
    if (rows == NULL)
        return 0;
    for (unsigned tries = 0;; tries++) {
        if (tries == SL_SITE_READ_TRIES)
            __atomic_store_n(&blk->hold, 1, __ATOMIC_RELAXED);
        else if (tries > SL_SITE_READ_TRIES)
            sched_yield(); /* the owner may be off its CPU in the middle of a take */
        unsigned seq = __atomic_load_n(&blk->seq, __ATOMIC_ACQUIRE);
        if (seq & 1u)
            continue;
        rows_copy(scratch.rows, rows, n);
        for (unsigned k = 0; sl_site_depth == 1 && k < SL_SITE_CACHE; k++) {
            const sl_site_slot *s = &blk->cache[k];
            for (int f = 0; f < SL_SITE_NVALS; f++)
                scratch.vals[k * SL_SITE_NVALS + f] = __atomic_load_n(&s->vals[f],
                                                                      __ATOMIC_RELAXED);
            scratch.entry[k] = __atomic_load_n(&s->entry, __ATOMIC_RELAXED);
        }
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if (__atomic_load_n(&blk->seq, __ATOMIC_RELAXED) == seq)
            break;
    }
    __atomic_store_n(&blk->hold, 0, __ATOMIC_RELAXED);
    return 1;
}

void sl_site_load_all(uint64_t *out, unsigned n)
{
    size_t total = sl_keytab_entries(&sl_sites);
    if (total == 0)
        return;
    for (unsigned i = sl_keytab_next(&sl_sites, ~0u, n); i < total;
         i = sl_keytab_next(&sl_sites, i, n)) {
        const uint64_t *v = sl_keytab_vals(&sl_sites, i);
        for (int f = 0; f < SL_SITE_NVALS; f++)
            out[(size_t)i * SL_SITE_NVALS + f] = __atomic_load_n(&v[f], __ATOMIC_RELAXED);
    }
    unsigned used = sl_thread_blocks_used();
    for (unsigned b = 0; b < used; b++) {
        if (!block_load(&blocks[b], n))
            continue;
        for (unsigned i = sl_keytab_next(&sl_sites, ~0u, n); i < total;
             i = sl_keytab_next(&sl_sites, i, n))
            for (size_t f = (size_t)i * SL_SITE_NVALS; f < (size_t)(i + 1) * SL_SITE_NVALS; f++)
                out[f] += scratch.rows[f];
        for (unsigned k = 0; sl_site_depth == 1 && k < SL_SITE_CACHE; k++) {
            unsigned e = scratch.entry[k]; /* a key newer than n counts in a later reading */
            if (e >= total || (e >= n && e < sl_sites.max_keys))
                continue;
            for (int f = 0; f < SL_SITE_NVALS; f++)
                out[(size_t)e * SL_SITE_NVALS + f] += scratch.vals[k * SL_SITE_NVALS + f];
        }
    }
}

/* What dl_iterate_phdr finds about one address: the module holding it. */
typedef struct sl_module_hit {
    uint64_t pc;
    int found;
    uint64_t bias;
    char build_id[sizeof(((sl_rec_callsite_frame *)0)->build_id)];
    char name[sizeof(((sl_rec_callsite_frame *)0)->module)];
} sl_module_hit;

/* Copies the GNU build-id of the module whose PT_NOTE segment is ph into out (n bytes) as
 * lowercase hex, NUL-terminated; out is left as it is when the segment holds none. */
static void note_build_id(const struct dl_phdr_info *info, const ElfW(Phdr) *ph, char *out,
                          size_t n)
{
    const unsigned char *p = (const unsigned char *)(info->dlpi_addr + ph->p_vaddr);
    const unsigned char *end = p + ph->p_memsz;
    while (p + sizeof(ElfW(Nhdr)) <= end) {
        const ElfW(Nhdr) *note = (const ElfW(Nhdr) *)(const void *)p;
        const unsigned char *name = p + sizeof *note;
        const unsigned char *desc = name + ((note->n_namesz + 3u) & ~3u);
        const unsigned char *next = desc + ((note->n_descsz + 3u) & ~3u);
        if (next > end)
            return;
        if (note->n_type == NT_GNU_BUILD_ID && note->n_namesz == 4 &&
            memcmp(name, "GNU", 4) == 0) {
            size_t max = (n - 1) / 2;
            for (size_t i = 0; i < note->n_descsz && i < max; i++)
                snprintf(out + 2 * i, 3, "%02x", desc[i]);
            return;
        }
        p = next;
    }
}

/* Where sl_exe_build_id's callback writes. */
typedef struct sl_text_out {
    char *text;
    size_t size;
} sl_text_out;

/* dl_iterate_phdr callback: the executable (the module without a name, listed first) has
 * its build-id copied into arg (an sl_text_out); stops there. */
static int exe_module(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    sl_text_out *out = arg;
    if (info->dlpi_name != NULL && info->dlpi_name[0] != '\0')
        return 0;
    for (int i = 0; i < info->dlpi_phnum && out->text[0] == '\0'; i++)
        if (info->dlpi_phdr[i].p_type == PT_NOTE)
            note_build_id(info, &info->dlpi_phdr[i], out->text, out->size);
    return 1;
}

void sl_exe_build_id(char *out, size_t n)
{
    if (n == 0)
        return;
    memset(out, 0, n);
    sl_text_out where = { out, n };
    dl_iterate_phdr(exe_module, &where);
}

/* dl_iterate_phdr callback: is hit->pc (a return address: the call is just before it)
 * in one of this module's loaded segments? */
static int find_module(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    sl_module_hit *hit = arg;
    uint64_t at = hit->pc - 1;
    int inside = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uint64_t start = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == PT_LOAD && at >= start && at < start + ph->p_memsz)
            inside = 1;
    }
    if (!inside)
        return 0;
    hit->found = 1;
    hit->bias = info->dlpi_addr;
    for (int i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_NOTE && hit->build_id[0] == '\0')
            note_build_id(info, &info->dlpi_phdr[i], hit->build_id, sizeof hit->build_id);
    const char *name = info->dlpi_name;
    if (name == NULL || name[0] == '\0') { /* the executable */
        ssize_t n = readlink("/proc/self/exe", hit->name, sizeof hit->name - 1);
        hit->name[n > 0 ? n : 0] = '\0';
    } else {
        snprintf(hit->name, sizeof hit->name, "%s", name);
    }
    return 1;
}

unsigned sl_site_describe(unsigned i, sl_rec_callsite_frame *out)
{
    const sl_site_path *path = sl_keytab_key(&sl_site_paths, i);
    for (unsigned f = 0; f < path->depth; f++) {
        sl_module_hit hit;
        memset(&hit, 0, sizeof hit);
        hit.pc = path->pc[f];
        sl_rec_callsite_frame *r = &out[f];
        memset(r, 0, sizeof *r);
        r->site_id = i;
        r->frame = f;
        r->depth = path->depth;
        if (sl_py_tagged(hit.pc))
            sl_py_describe(hit.pc, r);
        else if (hit.pc != 0 && dl_iterate_phdr(find_module, &hit) && hit.found) {
            r->site_offset = hit.pc - hit.bias;
            memcpy(r->build_id, hit.build_id, sizeof r->build_id);
            memcpy(r->module, hit.name, sizeof r->module);
        }
    }
    return path->depth;
}
