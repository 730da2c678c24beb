/*
 * family.c — communicator families (see family.h): the descriptions of the
 * communicators this rank made and their point-to-point traffic.
 */
#define _GNU_SOURCE /* dladdr1 */
#include "family.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "core.h"
#include "handles.h"
#include "monitored.h"

sl_keytab sl_comm_p2p;

/* One description and its revision (moved by every change). */
typedef struct sl_comm_desc {
    sl_rec_comm rec;
    uint32_t revision;
} sl_comm_desc;

static sl_comm_desc *descs;
static unsigned n_descs, max_descs;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

/* Overflow entry i of comm_p2p: op i / 2, sent (i even) or received; no communicator,
 * no peer. */
static void p2p_overflow_key(void *key, unsigned i)
{
    *(sl_comm_p2p_key *)key = (sl_comm_p2p_key){ .comm_id = SL_BOUND_overflow_comm,
                                                 .op = i >> 1, .peer = SL_BOUND_no_rank,
                                                 .received = i & 1u };
}

/* The made code of a creating op. */
static uint32_t made_of(int op)
{
    switch (op) {
    case SL_OP_MPI_Comm_split: return SL_MADE_SPLIT;
    case SL_OP_MPI_Comm_split_type: return SL_MADE_SPLIT_TYPE;
    case SL_OP_MPI_Cart_create: return SL_MADE_CART_CREATE;
    case SL_OP_MPI_Cart_sub: return SL_MADE_CART_SUB;
    case SL_OP_MPI_Comm_create: return SL_MADE_CREATE;
    case SL_OP_MPI_Comm_create_group: return SL_MADE_CREATE_GROUP;
    case SL_OP_MPI_Comm_dup: return SL_MADE_DUP;
    case SL_OP_MPI_Comm_dup_with_info: return SL_MADE_DUP;
    case SL_OP_MPI_Intercomm_create: return SL_MADE_INTERCOMM_CREATE;
    case SL_OP_MPI_Intercomm_merge: return SL_MADE_INTERCOMM_MERGE;
    case SL_OP_MPI_Graph_create: return SL_MADE_GRAPH;
    case SL_OP_MPI_Dist_graph_create: return SL_MADE_GRAPH;
    default: return SL_MADE_GRAPH; /* MPI_Dist_graph_create_adjacent */
    }
}

/* The wire's code of a split type (comm.color of a split_type; the MPI libraries number
 * the types differently): 1 MPI_COMM_TYPE_SHARED, 2 MPI_COMM_TYPE_HW_GUIDED,
 * 3 MPI_COMM_TYPE_HW_UNGUIDED (where mpi.h has them), 0 any other (the library's own). */
static uint32_t split_type_code(int type)
{
    if (type == MPI_COMM_TYPE_SHARED)
        return 1;
#ifdef MPI_COMM_TYPE_HW_GUIDED
    if (type == MPI_COMM_TYPE_HW_GUIDED)
        return 2;
#endif
#ifdef MPI_COMM_TYPE_HW_UNGUIDED
    if (type == MPI_COMM_TYPE_HW_UNGUIDED)
        return 3;
#endif
    return 0;
}

/* Writes a grid "d0xd1x..." of n dimensions into out (size bytes, NUL-padded). */
static void put_grid(char *out, size_t size, int n, const int *dims)
{
    size_t pos = 0;
    memset(out, 0, size);
    for (int i = 0; i < n && pos + 1 < size; i++) {
        int w = snprintf(out + pos, size - pos, i ? "x%d" : "%d", dims[i]);
        if (w < 0 || (size_t)w >= size - pos) {
            memset(out, 0, size); /* too many dimensions for the field: no grid */
            return;
        }
        pos += (size_t)w;
    }
}

/* Call site of a return address: its module's path and the offset in it (minus the
 * module's load bias, as a call site's frame: the same frame, named by the same stored
 * answer). */
static void put_site(sl_rec_comm *r, const void *site)
{
    Dl_info info;
    struct link_map *map = NULL;
    if (site == NULL || dladdr1(site, &info, (void **)&map, RTLD_DL_LINKMAP) == 0
        || map == NULL)
        return;
    r->site_offset = (uint64_t)((uintptr_t)site - (uintptr_t)map->l_addr);
    if (info.dli_fname != NULL)
        strncpy(r->site_module, info.dli_fname, sizeof r->site_module - 1);
}

/* Adds or replaces the description of r->comm_id (lock held); a new one beyond the
 * bound is a dropped key. */
static void describe_locked(const sl_rec_comm *r)
{
    for (unsigned i = 0; i < n_descs; i++) {
        if (descs[i].rec.comm_id == r->comm_id) { /* an id given back and taken again */
            descs[i].rec = *r;
            descs[i].revision++;
            return;
        }
    }
    if (n_descs >= max_descs) {
        sl_key_dropped();
        return;
    }
    descs[n_descs].rec = *r;
    descs[n_descs].revision = 1;
    n_descs++;
}

/* Whether the communicators of descriptions a and b were made alike: by the same kind of
 * call from the same parent at the same call site (a loop making and freeing them). */
static int made_alike(const sl_rec_comm *a, const sl_rec_comm *b)
{
    return a->made == b->made && a->parent_id == b->parent_id
           && a->site_offset == b->site_offset
           && strncmp(a->site_module, b->site_module, sizeof a->site_module) == 0;
}

/* The id of a communicator of id `id` made as r says (lock held): `id`, unless a freed
 * communicator made another way was described under it (its id given back and taken by
 * this one: handles.h); then one mixed from `id` and how r was made (the same on every
 * member), so the freed one's figures keep its description, and communicators made and
 * freed in a loop there keep sharing one id, as they would have shared `id`. */
static uint32_t unreused_id_locked(uint32_t id, const sl_rec_comm *r)
{
    for (unsigned i = 0; i < n_descs; i++) {
        if (descs[i].rec.comm_id != id)
            continue;
        if (made_alike(&descs[i].rec, r))
            return id;
        uint64_t h = sl_hash_words2(((uint64_t)id << 32) | r->made,
                                    r->site_offset ^ ((uint64_t)r->parent_id << 40));
        uint32_t other = (uint32_t)(h ^ (h >> 32));
        return other == 0 || other >= 0xFFFFFFFEu ? 1u : other;
    }
    return id;
}

/* Describes newcomm (this rank's record of it) as made by made from parent_id. */
static void describe(MPI_Comm newcomm, uint32_t made, uint32_t parent_id, uint32_t family_id,
                     sl_rec_comm *r)
{
    const sl_handle_rec *rec = sl_comm_rec(newcomm);
    int rank = 0;
    if (rec == NULL || descs == NULL)
        return;
    PMPI_Comm_rank(newcomm, &rank);
    r->parent_id = parent_id;
    r->made = made;
    r->comm_size = (uint32_t)rec->size;
    r->comm_rank = (uint32_t)rank;
    pthread_mutex_lock(&lock);
    uint32_t id = unreused_id_locked(rec->comm_id, r);
    if (id != rec->comm_id)
        sl_comm_set_id(newcomm, id);
    r->comm_id = id;
    r->family_id = family_id != 0 ? family_id : id;
    describe_locked(r);
    pthread_mutex_unlock(&lock);
}

/*
 * The counter blocks' rows of comm_p2p (core.h): block b's row of entry i at
 * (b x entries + i) x SL_CP2P_NVALS, written only by the thread holding block b
 * (plain adds, no lock prefix), read by the sender (sl_comm_p2p_load). Mapped at
 * sl_family_init without reserving memory (a thread touches the pages of the entries it
 * counts); NULL without it (every thread adds to the shared counters atomically).
 */
static uint64_t *block_rows;
static size_t block_rows_bytes;

/*
 * A thread's cache of comm_p2p entries: a message's (communicator handle, rank, op,
 * direction) -> its entry index and the thread's row of it (its block's, else the shared
 * counters), direct mapped. Keyed by what the wrapper has in hand, a hit needs neither
 * the communicator's record (sl_comm_rec: a call and a probe of the handle table) nor
 * the table's hash probe and key compare (that lookup was a fifth of a self message's
 * CPU time, most of it a stalled reload of the key built in memory: bench/RESULTS.md).
 * Only ordinary entries are cached: a key folded into an overflow entry is looked up
 * (and counted as dropped) on every call, as before. gen is sl_comm_recs_gen (moved when
 * a communicator's record goes or changes its id, and when the tables are made again
 * with the handle cache: handles.h): a slot filled before it moved never matches, so a
 * handle reused for another communicator never counts into the freed one's entry; 0 =
 * empty. own: row is the thread's block's.
 */
#define CP2P_CACHE 32u
typedef struct cp2p_slot {
    uint64_t w0, w1;
    uint32_t gen, own;
    uint64_t *row;
} cp2p_slot;
static __thread cp2p_slot cp2p_cache[CP2P_CACHE] __attribute__((tls_model("initial-exec")));

/* The cache slot of a key's two words: one multiply (the top bits of a product by an odd
 * constant depend on every bit of the other factor). */
static inline unsigned cp2p_slot_of(uint64_t w0, uint64_t w1)
{
    uint64_t x = w0 ^ (w1 << 23 | w1 >> 41);
    return (unsigned)((x * 0x9E3779B97F4A7C15ull) >> 59) & (CP2P_CACHE - 1);
}

int sl_family_init(unsigned max_keys)
{
    descs = calloc(max_keys + 1u, sizeof *descs);
    max_descs = max_keys;
    n_descs = 0;
    if (descs == NULL
        || sl_keytab_init(&sl_comm_p2p, max_keys, sizeof(sl_comm_p2p_key), SL_CP2P_NVALS,
                          2u * SL_OP_COUNT, p2p_overflow_key) != 0) {
        sl_family_fini();
        return -1;
    }
    block_rows_bytes = (size_t)SL_THREAD_BLOCKS * sl_keytab_entries(&sl_comm_p2p)
                       * SL_CP2P_NVALS * sizeof(uint64_t);
    void *rows = mmap(NULL, block_rows_bytes, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    __atomic_store_n(&block_rows, rows == MAP_FAILED ? NULL : (uint64_t *)rows,
                     __ATOMIC_RELEASE);
    /* A session program's world communicator over another process set than mpi://WORLD
     * (mpi://SELF: lifecycle.h) is no world: not described. */
    int size = 0;
    if (PMPI_Comm_size(sl_core.world_comm, &size) == MPI_SUCCESS && size == sl_core.world_size) {
        sl_rec_comm world = { 0 };
        describe(sl_core.world_comm, SL_MADE_WORLD, 0, 0, &world);
    }
    return 0;
}

void sl_family_fini(void)
{
    pthread_mutex_lock(&lock);
    free(descs);
    descs = NULL;
    n_descs = max_descs = 0;
    pthread_mutex_unlock(&lock);
    uint64_t *rows = __atomic_exchange_n(&block_rows, NULL, __ATOMIC_ACQ_REL);
    if (rows != NULL)
        munmap(rows, block_rows_bytes);
    sl_keytab_fini(&sl_comm_p2p);
}

/* This thread's row of comm_p2p entry i: its block's (*own = 1), else the shared
 * counters (*own = 0: atomic adds). */
static uint64_t *my_row(unsigned i, uint32_t *own)
{
    uint64_t *rows = __atomic_load_n(&block_rows, __ATOMIC_ACQUIRE);
    sl_my_calls(); /* the thread's block claimed, if one is free */
    int b = sl_tls_block - 1;
    *own = rows != NULL && b >= 0;
    if (!*own)
        return sl_keytab_vals(&sl_comm_p2p, i);
    return rows + ((size_t)b * sl_keytab_entries(&sl_comm_p2p) + i) * SL_CP2P_NVALS;
}

void sl_comm_p2p_load(unsigned i, uint64_t out[SL_CP2P_NVALS])
{
    const uint64_t *v = sl_keytab_vals(&sl_comm_p2p, i);
    for (int f = 0; f < SL_CP2P_NVALS; f++)
        out[f] = __atomic_load_n(&v[f], __ATOMIC_RELAXED);
    const uint64_t *rows = __atomic_load_n(&block_rows, __ATOMIC_ACQUIRE);
    if (rows == NULL)
        return;
    size_t entries = sl_keytab_entries(&sl_comm_p2p);
    unsigned used = sl_thread_blocks_used();
    for (unsigned b = 0; b < used; b++) {
        const uint64_t *r = rows + ((size_t)b * entries + i) * SL_CP2P_NVALS;
        for (int f = 0; f < SL_CP2P_NVALS; f++)
            out[f] += __atomic_load_n(&r[f], __ATOMIC_RELAXED);
    }
}

void sl_family_made(int op, MPI_Comm parent, MPI_Comm newcomm, int color, int key, int ndims,
                    const int *dims, const void *site)
{
    uint32_t made = made_of(op);
    const sl_handle_rec *prec = sl_comm_rec(parent);
    uint32_t parent_id = prec != NULL ? prec->comm_id : 0;
    uint32_t nth = sl_comm_next_made(parent);
    if (newcomm == MPI_COMM_NULL)
        return;
    int topology = MPI_UNDEFINED;
    if (PMPI_Topo_test(newcomm, &topology) == MPI_SUCCESS
        && (topology == MPI_GRAPH || topology == MPI_DIST_GRAPH))
        sl_monitored_graph_made(newcomm);
    /* the parent's id and its count of creating calls: the same on every member */
    uint32_t family = 0;
    if (made != SL_MADE_INTERCOMM_CREATE && prec != NULL) {
        uint64_t h = sl_hash_words2(((uint64_t)parent_id << 32) | nth, made);
        family = (uint32_t)(h ^ (h >> 32));
        if (family == 0)
            family = 1;
    }
    sl_rec_comm r = { 0 };
    if (made == SL_MADE_SPLIT || made == SL_MADE_SPLIT_TYPE) {
        r.color = made == SL_MADE_SPLIT ? (uint32_t)color : split_type_code(color);
        r.key = (uint32_t)key;
    }
    if (made == SL_MADE_CART_CREATE && dims != NULL && ndims > 0)
        put_grid(r.grid, sizeof r.grid, ndims, dims);
    if (made == SL_MADE_CART_SUB && dims != NULL) {
        int n = 0, pdims[32], periods[32], coords[32];
        if (PMPI_Cartdim_get(parent, &n) == MPI_SUCCESS && n > 0 && n <= 32
            && PMPI_Cart_get(parent, n, pdims, periods, coords) == MPI_SUCCESS) {
            put_grid(r.grid, sizeof r.grid, n, pdims);
            for (int i = 0; i < n; i++)
                if (dims[i])
                    r.kept |= 1u << i;
        }
    }
    put_site(&r, site);
    describe(newcomm, made, parent_id, family, &r);
}

void sl_family_from_group(MPI_Comm newcomm, const void *site)
{
    if (newcomm == MPI_COMM_NULL)
        return;
    sl_rec_comm r = { 0 };
    put_site(&r, site);
    describe(newcomm, SL_MADE_FROM_GROUP, 0, 0, &r);
}

void sl_family_named(MPI_Comm comm, const char *name)
{
    const sl_handle_rec *rec = sl_comm_rec(comm);
    if (rec == NULL || name == NULL || descs == NULL)
        return;
    pthread_mutex_lock(&lock);
    for (unsigned i = 0; i < n_descs; i++) {
        if (descs[i].rec.comm_id == rec->comm_id) {
            memset(descs[i].rec.name, 0, sizeof descs[i].rec.name);
            strncpy(descs[i].rec.name, name, sizeof descs[i].rec.name - 1);
            descs[i].revision++;
            break;
        }
    }
    pthread_mutex_unlock(&lock);
}

/* The thread's row of the comm_p2p entry of a message (sl_family_count's arguments)
 * into *row and *own, found through the communicator's record and the table, and kept in
 * cache slot s (key w0, w1 at generation gen) when the entry is an ordinary one. Returns
 * 0 for a peer outside MPI_COMM_WORLD (spawned), which has no entry. */
static int p2p_row(MPI_Comm comm, int op, int rank, int received, cp2p_slot *s, uint64_t w0,
                   uint64_t w1, uint32_t gen, uint64_t **row, uint32_t *own)
{
    const sl_handle_rec *rec = sl_comm_rec(comm);
    unsigned overflow = 2u * (unsigned)op + (received ? 1u : 0u);
    if (rec == NULL) {
        sl_key_dropped();
        *row = my_row(sl_keytab_overflow(&sl_comm_p2p, overflow), own);
        return 1;
    }
    if (rank >= rec->size || rec->world[rank] < 0)
        return 0; /* not in the p2p table either */
    sl_comm_p2p_key key = { .comm_id = rec->comm_id, .op = (uint32_t)op,
                            .peer = (uint32_t)rec->world[rank],
                            .received = received ? 1u : 0u };
    uint64_t k[2];
    _Static_assert(sizeof key == sizeof k, "a comm_p2p key is two words");
    memcpy(k, &key, sizeof k);
    unsigned i = sl_keytab_get(&sl_comm_p2p, &key, sl_hash_words2(k[0], k[1]), overflow);
    *row = my_row(i, own);
    if (i < sl_comm_p2p.max_keys)
        *s = (cp2p_slot){ .w0 = w0, .w1 = w1, .gen = gen, .own = *own, .row = *row };
    return 1;
}

void sl_family_count(MPI_Comm comm, int op, int rank, int received, uint64_t bytes,
                     uint64_t ticks)
{
    if (sl_comm_p2p.entries == NULL)
        return;
    uint64_t w0 = SL_HKEY(comm);
    uint64_t w1 = (uint32_t)rank | (uint64_t)(uint32_t)op << 32 | (uint64_t)(received != 0) << 63;
    uint32_t gen = __atomic_load_n(&sl_comm_recs_gen, __ATOMIC_ACQUIRE);
    cp2p_slot *s = &cp2p_cache[cp2p_slot_of(w0, w1)];
    uint64_t *row;
    uint32_t own;
    if (__builtin_expect(s->gen == gen && s->w0 == w0 && s->w1 == w1, 1)) {
        row = s->row;
        own = s->own;
    } else if (!p2p_row(comm, op, rank, received, s, w0, w1, gen, &row, &own)) {
        return;
    }
    if (__builtin_expect(own, 1)) {
        sl_own_add(&row[SL_CP2P_MSGS], 1);
        sl_own_add(&row[SL_CP2P_BYTES], bytes);
        sl_own_add(&row[SL_CP2P_TIME], ticks);
        return;
    }
    __atomic_fetch_add(&row[SL_CP2P_MSGS], 1, __ATOMIC_RELAXED);
    if (bytes != 0)
        __atomic_fetch_add(&row[SL_CP2P_BYTES], bytes, __ATOMIC_RELAXED);
    if (ticks != 0)
        __atomic_fetch_add(&row[SL_CP2P_TIME], ticks, __ATOMIC_RELAXED);
}

unsigned sl_family_changed(sl_rec_comm *out, unsigned max, uint32_t *seen)
{
    unsigned n = 0;
    pthread_mutex_lock(&lock);
    for (unsigned i = 0; descs != NULL && i < n_descs && n < max; i++) {
        if (descs[i].revision != seen[i]) {
            out[n++] = descs[i].rec;
            seen[i] = descs[i].revision;
        }
    }
    pthread_mutex_unlock(&lock);
    return n;
}

unsigned sl_family_capacity(void)
{
    return max_descs;
}
