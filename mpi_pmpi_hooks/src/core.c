/*
 * core.c — per-rank counter tables and the counting done on the MPI call
 * path (see core.h). Only relaxed atomic adds (and plain stores into a
 * thread's own counter block) happen here while the application runs;
 * allocation is done once at init.
 */
#include "core.h"

#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "coll.h"
#include "family.h"
#include "handles.h"
#include "io.h"

sl_core_state sl_core;
__thread int sl_tls_in_call __attribute__((tls_model("initial-exec")));
__thread sl_call_counters *sl_tls_calls __attribute__((tls_model("initial-exec")));
__thread uint64_t *sl_tls_io __attribute__((tls_model("initial-exec")));
__thread sl_peer_counters *sl_tls_peers __attribute__((tls_model("initial-exec")));
__thread int sl_tls_block __attribute__((tls_model("initial-exec")));
sl_keytab sl_coll;

/* The per-thread counter blocks. Static: a thread may hold one after
 * sl_core_fini, and pages never touched cost no memory (a thread touches the
 * rows of the ops it calls). */
typedef struct sl_thread_block {
    int owned;                       /* 1 while a thread holds it (atomic) */
    sl_call_counters c;
} sl_thread_block;
static sl_thread_block blocks[SL_THREAD_BLOCKS];
/* The blocks' peer rows: block b's world_size rows start at b x world_size.
 * Mapped at MPI init without reserving memory (a thread touches the pages of
 * the peers it talks to); NULL without it (every thread adds atomically). */
static sl_peer_counters *block_peers;
static size_t block_peers_bytes;
static unsigned blocks_used;         /* blocks [0, used) were ever claimed (atomic) */
static pthread_key_t blocks_key;     /* its destructor hands a block back at thread exit */
static int blocks_key_ok;
static pthread_once_t blocks_once = PTHREAD_ONCE_INIT;

/* Thread exit: the block goes back to the pool with its counts (a later
 * owner adds on); calls this thread still makes count in the shared ones. */
static void block_release(void *p)
{
    sl_tls_calls = &sl_core.calls;
    sl_tls_io = NULL;
    sl_tls_peers = NULL;
    sl_tls_block = 0;
    sl_site_release();
    __atomic_store_n(&((sl_thread_block *)p)->owned, 0, __ATOMIC_RELEASE);
}

/* Creates blocks_key (pthread_once). */
static void blocks_key_create(void)
{
    blocks_key_ok = pthread_key_create(&blocks_key, block_release) == 0;
}

/* Once per process, from library load (io.c) and MPI init. */
void sl_threads_init(void)
{
    pthread_once(&blocks_once, blocks_key_create);
}

/* Blocks ever claimed. */
unsigned sl_thread_blocks_used(void)
{
    return __atomic_load_n(&blocks_used, __ATOMIC_ACQUIRE);
}

/* First counted call of a thread: the first free block, or the shared counters. */
sl_call_counters *sl_thread_claim(void)
{
    sl_call_counters *t = &sl_core.calls;
    uint64_t *io = NULL;
    for (unsigned i = 0; blocks_key_ok && i < SL_THREAD_BLOCKS; i++) {
        int expected = 0;
        if (__atomic_load_n(&blocks[i].owned, __ATOMIC_RELAXED) != 0
            || !__atomic_compare_exchange_n(&blocks[i].owned, &expected, 1, 0,
                                            __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
            continue;
        if (pthread_setspecific(blocks_key, &blocks[i]) != 0) {
            __atomic_store_n(&blocks[i].owned, 0, __ATOMIC_RELEASE);
            break;
        }
        io = sl_io_block_rows(i); /* before the block counts as used: readers see its rows */
        sl_site_claim(i);
        unsigned used = __atomic_load_n(&blocks_used, __ATOMIC_RELAXED);
        while (used < i + 1
               && !__atomic_compare_exchange_n(&blocks_used, &used, i + 1, 1,
                                               __ATOMIC_RELEASE, __ATOMIC_RELAXED)) {
        }
        t = &blocks[i].c;
        sl_tls_block = (int)i + 1;
        break;
    }
    sl_tls_io = io;
    sl_tls_calls = t;
    return t;
}

/* This thread's peer rows: its block's, once the tables exist. */
sl_peer_counters *sl_thread_peers(void)
{
    sl_call_counters *t = sl_my_calls();
    if (t == &sl_core.calls || block_peers == NULL)
        return NULL;
    size_t b = (size_t)((sl_thread_block *)((char *)t - offsetof(sl_thread_block, c)) - blocks);
    sl_tls_peers = block_peers + b * (size_t)sl_core.world_size;
    return sl_tls_peers;
}

sl_type_size sl_type_cache[SL_TYPE_CACHE];
int sl_type_cache_n;

/* Fills sl_type_cache with the predefined types most programs send. */
static void type_cache_init(void)
{
    const MPI_Datatype common[SL_TYPE_CACHE] = { MPI_BYTE, MPI_CHAR, MPI_INT, MPI_DOUBLE,
                                                 MPI_FLOAT, MPI_LONG, MPI_LONG_LONG,
                                                 MPI_UNSIGNED_LONG };
    int n = 0;
    for (int i = 0; i < SL_TYPE_CACHE; i++) {
        int size;
        if (PMPI_Type_size(common[i], &size) == MPI_SUCCESS && size > 0) {
            sl_type_cache[n].type = common[i];
            sl_type_cache[n].size = size;
            n++;
        }
    }
    __atomic_store_n(&sl_type_cache_n, n, __ATOMIC_RELEASE);
}

/* The overflow key of op i in the coll table: a valid coll record of that op whose
 * communicator is the overflow id (size 0: the folded communicators differ). */
static void coll_overflow_key(void *key, unsigned op)
{
    *(sl_coll_key *)key = (sl_coll_key){ .comm_id = SL_BOUND_overflow_comm, .op = op,
                                         .root = SL_BOUND_no_rank, .size = 0 };
}

/* Queries the world (sl_core.world_group) and allocates the per-peer, RMA, handle and coll
 * tables. */
int sl_core_init(unsigned max_keys)
{
    if (PMPI_Group_rank(sl_core.world_group, &sl_core.world_rank) != MPI_SUCCESS
        || PMPI_Group_size(sl_core.world_group, &sl_core.world_size) != MPI_SUCCESS
        || sl_core.world_rank == MPI_UNDEFINED || sl_core.world_size <= 0) {
        sl_warn("cannot query the world group; stacklens is off");
        PMPI_Group_free(&sl_core.world_group);
        return -1;
    }
    sl_core.peers = calloc((size_t)sl_core.world_size, sizeof *sl_core.peers);
    if (sl_core.peers == NULL) {
        sl_warn("rank %d: no memory for %d peer counters; stacklens is off",
                sl_core.world_rank, sl_core.world_size);
        PMPI_Group_free(&sl_core.world_group);
        return -1;
    }
    memset(&sl_core.calls, 0, sizeof sl_core.calls);
    block_peers_bytes = (size_t)SL_THREAD_BLOCKS * (size_t)sl_core.world_size * sizeof *block_peers;
    void *rows = mmap(NULL, block_peers_bytes, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    block_peers = rows == MAP_FAILED ? NULL : rows;
    sl_threads_init();
    type_cache_init();
    sl_core.rma = calloc((size_t)sl_core.world_size * (SL_RMA_COUNT > 0 ? SL_RMA_COUNT : 1),
                         sizeof *sl_core.rma);
    if (sl_core.rma == NULL || sl_handles_init(max_keys) != 0
        || sl_keytab_init(&sl_coll, max_keys, sizeof(sl_coll_key), SL_COLL_NVALS, SL_OP_COUNT,
                          coll_overflow_key) != 0) {
        sl_warn("rank %d: no memory for the counter tables; stacklens is off",
                sl_core.world_rank);
        sl_core_fini();
        return -1;
    }
    sl_comm_rec(sl_core.world_comm); /* ordinal 0 for the world (see handles.h) */
    if (sl_family_init(max_keys) != 0) {
        sl_warn("rank %d: no memory for the communicator tables; stacklens is off",
                sl_core.world_rank);
        sl_core_fini();
        return -1;
    }
    return 0;
}

/* Frees the tables and the world group. */
void sl_core_fini(void)
{
    if (block_peers != NULL)
        munmap(block_peers, block_peers_bytes);
    block_peers = NULL;
    free(sl_core.peers);
    free(sl_core.rma);
    sl_core.peers = NULL;
    sl_core.rma = NULL;
    sl_handles_fini();
    sl_keytab_fini(&sl_coll);
    sl_family_fini();
    PMPI_Group_free(&sl_core.world_group);
}

/* count x type size of a type outside the cache (count > 0). */
uint64_t sl_type_bytes_queried(int64_t count, MPI_Datatype datatype)
{
    int size;
    if (PMPI_Type_size(datatype, &size) != MPI_SUCCESS || size <= 0)
        return 0;
    return (uint64_t)count * (uint64_t)size;
}

/* Translates rank (>= 0) of comm to MPI_COMM_WORLD through the record cached per
 * communicator (handles.h): one lock-free lookup. */
int sl_world_rank_cached(MPI_Comm comm, int rank)
{
    const sl_handle_rec *rec = sl_comm_rec(comm);
    if (rec == NULL || rank >= rec->size)
        return -1;
    return rec->world[rank];
}

#if !defined(OPEN_MPI) && !defined(MPICH_VERSION)
/* Received bytes asked of the MPI (one query: MPI_BYTE counts the bytes of the
 * type signature, as elements x type size would); messages of 2 GiB or more do
 * not fit an int: elements x type size then. */
uint64_t sl_status_bytes_queried(const MPI_Status *status, MPI_Datatype datatype)
{
    int n = 0;
    if (PMPI_Get_count(status, MPI_BYTE, &n) == MPI_SUCCESS && n != MPI_UNDEFINED)
        return n > 0 ? (uint64_t)n : 0;
    MPI_Count elems = 0;
    if (PMPI_Get_elements_x(status, datatype, &elems) == MPI_SUCCESS && elems != MPI_UNDEFINED)
        return sl_type_bytes(elems, datatype);
    return 0;
}
#endif

/* Relaxed atomic snapshot of one peer entry. */
void sl_core_load_peer(int i, sl_peer_counters *out)
{
    unsigned used = block_peers == NULL ? 0 : __atomic_load_n(&blocks_used, __ATOMIC_ACQUIRE);
    memset(out, 0, sizeof *out);
    for (unsigned b = 0; b <= used; b++) {
        const sl_peer_counters *p =
            b == 0 ? &sl_core.peers[i]
                   : &block_peers[(size_t)(b - 1) * (size_t)sl_core.world_size + (size_t)i];
        out->bytes_sent += __atomic_load_n(&p->bytes_sent, __ATOMIC_RELAXED);
        out->msgs_sent += __atomic_load_n(&p->msgs_sent, __ATOMIC_RELAXED);
        out->bytes_recv += __atomic_load_n(&p->bytes_recv, __ATOMIC_RELAXED);
        out->msgs_recv += __atomic_load_n(&p->msgs_recv, __ATOMIC_RELAXED);
    }
}

/* Relaxed atomic snapshot of one op entry: shared counters plus thread blocks. */
void sl_core_load_op(int i, sl_op_counters *out)
{
    unsigned used = __atomic_load_n(&blocks_used, __ATOMIC_RELAXED);
    memset(out, 0, sizeof *out);
    for (unsigned b = 0; b <= used; b++) {
        const sl_op_counters *c = b == 0 ? &sl_core.calls.ops[i] : &blocks[b - 1].c.ops[i];
        out->calls += __atomic_load_n(&c->calls, __ATOMIC_RELAXED);
        out->bytes += __atomic_load_n(&c->bytes, __ATOMIC_RELAXED);
        out->ticks += __atomic_load_n(&c->ticks, __ATOMIC_RELAXED);
    }
}

/* Relaxed atomic sum of one histogram bucket over the shared counters and blocks. */
uint64_t sl_core_load_hist(int op, int k)
{
    unsigned used = __atomic_load_n(&blocks_used, __ATOMIC_RELAXED);
    uint64_t n = __atomic_load_n(&sl_core.calls.hist[op][k], __ATOMIC_RELAXED);
    for (unsigned b = 0; b < used; b++)
        n += __atomic_load_n(&blocks[b].c.hist[op][k], __ATOMIC_RELAXED);
    return n;
}

/* Adds one RMA call to the target's row; bytes are returned for the op table. */
uint64_t sl_count_rma(MPI_Win win, int rank, int rma_slot, uint64_t bytes)
{
    if (rank < 0)
        return 0; /* MPI_PROC_NULL */
    const sl_handle_rec *rec = sl_win_rec(win);
    if (rec == NULL || rank >= rec->size || rec->world[rank] < 0)
        return bytes;
    sl_rma_counters *c = &sl_core.rma[(size_t)rec->world[rank] * SL_RMA_COUNT + (size_t)rma_slot];
    __atomic_fetch_add(&c->calls, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&c->bytes, bytes, __ATOMIC_RELAXED);
    return bytes;
}

/* Adds one collective call under (comm id, op, root world rank, size); a
 * communicator without a cached record (beyond STACKLENS_MAX_KEYS) folds into
 * the op's overflow entry. */
uint32_t sl_count_coll(MPI_Comm comm, int op, int root, uint64_t bytes, uint64_t ticks)
{
    const sl_handle_rec *rec = sl_comm_rec(comm);
    uint32_t comm_id = (uint32_t)SL_BOUND_no_comm;
    unsigned i;
    if (rec != NULL) {
        sl_coll_key key = { .comm_id = rec->comm_id, .op = (uint32_t)op,
                            .root = SL_BOUND_no_rank, .size = (uint32_t)rec->size };
        if (root >= 0 && root < rec->size && rec->world[root] >= 0)
            key.root = (uint32_t)rec->world[root];
        uint64_t w[2];
        _Static_assert(sizeof key == sizeof w, "a coll key is two words");
        memcpy(w, &key, sizeof w);
        i = sl_keytab_get(&sl_coll, &key, sl_hash_words2(w[0], w[1]), (unsigned)op);
        comm_id = rec->comm_id;
    } else {
        sl_key_dropped();
        i = sl_keytab_overflow(&sl_coll, (unsigned)op);
    }
    sl_keytab_add(&sl_coll, i, SL_COLL_CALLS, 1);
    sl_keytab_add(&sl_coll, i, SL_COLL_BYTES, bytes);
    sl_keytab_add(&sl_coll, i, SL_COLL_TIME, ticks);
    return comm_id;
}

/* Number of ranks of comm (the remote group of an intercommunicator). */
int64_t sl_comm_ranks(MPI_Comm comm)
{
    const sl_handle_rec *rec = sl_comm_rec(comm);
    return rec != NULL ? rec->size : 0;
}

/* Element i of a count array of int or (large) MPI_Count. */
static int64_t count_at(const void *counts, int large, int i)
{
    return large ? (int64_t)((const MPI_Count *)counts)[i] : (int64_t)((const int *)counts)[i];
}

/* Out-degree of comm's topology: its neighbours in neighbour collectives. */
int64_t sl_out_degree(MPI_Comm comm)
{
    int kind = MPI_UNDEFINED, n = 0, in = 0, out = 0, weighted = 0, rank = 0;
    if (PMPI_Topo_test(comm, &kind) != MPI_SUCCESS)
        return 0;
    if (kind == MPI_CART && PMPI_Cartdim_get(comm, &n) == MPI_SUCCESS)
        return 2 * (int64_t)n;
    if (kind == MPI_GRAPH && PMPI_Comm_rank(comm, &rank) == MPI_SUCCESS
        && PMPI_Graph_neighbors_count(comm, rank, &n) == MPI_SUCCESS)
        return n;
    if (kind == MPI_DIST_GRAPH
        && PMPI_Dist_graph_neighbors_count(comm, &in, &out, &weighted) == MPI_SUCCESS)
        return out;
    return 0;
}

/* count x type size x comm size (Alltoall, Reduce_scatter_block). */
uint64_t sl_bytes_all(MPI_Comm comm, int64_t count, MPI_Datatype datatype)
{
    return sl_type_bytes(count, datatype) * (uint64_t)sl_comm_ranks(comm);
}

/* True if this process is root of comm (intercommunicators: root is MPI_ROOT). */
int sl_is_root(MPI_Comm comm, int root)
{
    int rank = -1;
    return root == MPI_ROOT || (PMPI_Comm_rank(comm, &rank) == MPI_SUCCESS && rank == root);
}

/* Scatter: the root hands count x type to every rank; the others nothing. */
uint64_t sl_bytes_root_all(MPI_Comm comm, int root, int64_t count, MPI_Datatype datatype)
{
    return sl_is_root(comm, root) ? sl_bytes_all(comm, count, datatype) : 0;
}

/* Sum of counts[0..n) x type size over n ranks. */
static uint64_t sum_counts(int64_t n, const void *counts, int large, MPI_Datatype datatype)
{
    int64_t total = 0;
    for (int64_t i = 0; counts != NULL && i < n; i++)
        total += count_at(counts, large, (int)i);
    return sl_type_bytes(total, datatype);
}

/* types[i]: a Fortran handle (MPI_Fint) if fortran, else an MPI_Datatype. */
static MPI_Datatype type_at(const void *types, int fortran, int i)
{
    return fortran ? PMPI_Type_f2c(((const MPI_Fint *)types)[i])
                   : ((const MPI_Datatype *)types)[i];
}

/* Sum of counts[i] x size(types[i]) over n ranks (types: Fortran handles if fortran). */
static uint64_t sum_w(int64_t n, const void *counts, int large, const void *types, int fortran)
{
    uint64_t total = 0;
    for (int64_t i = 0; counts != NULL && types != NULL && i < n; i++)
        total += sl_type_bytes(count_at(counts, large, (int)i), type_at(types, fortran, (int)i));
    return total;
}

/* Alltoallv, Reduce_scatter: the sum of the per-rank counts. */
uint64_t sl_bytes_sum(MPI_Comm comm, const void *counts, int large, MPI_Datatype datatype)
{
    return sum_counts(sl_comm_ranks(comm), counts, large, datatype);
}

/* Scatterv: the sum of sendcounts, at the root only. */
uint64_t sl_bytes_root_sum(MPI_Comm comm, int root, const void *counts, int large,
                           MPI_Datatype datatype)
{
    return sl_is_root(comm, root) ? sl_bytes_sum(comm, counts, large, datatype) : 0;
}

/* Alltoallw: per-rank counts and types. */
uint64_t sl_bytes_w(MPI_Comm comm, const void *counts, int large, const void *types, int fortran)
{
    return sum_w(sl_comm_ranks(comm), counts, large, types, fortran);
}

/* Neighbour collectives: count x type to every out-neighbour. */
uint64_t sl_bytes_nbr(MPI_Comm comm, int64_t count, MPI_Datatype datatype)
{
    return sl_type_bytes(count, datatype) * (uint64_t)sl_out_degree(comm);
}

/* Neighbor_alltoallv: the sum of the counts of the out-neighbours. */
uint64_t sl_bytes_nbr_sum(MPI_Comm comm, const void *counts, int large, MPI_Datatype datatype)
{
    return sum_counts(sl_out_degree(comm), counts, large, datatype);
}

/* Neighbor_alltoallw: per-neighbour counts and types. */
uint64_t sl_bytes_nbr_w(MPI_Comm comm, const void *counts, int large, const void *types,
                        int fortran)
{
    return sum_w(sl_out_degree(comm), counts, large, types, fortran);
}

/* n messages of bytes each in op's histogram (one add). */
void sl_hist_blocks(int op, int64_t n, uint64_t bytes)
{
    if (n <= 0)
        return;
    sl_call_counters *t = sl_my_calls();
    sl_calls_add(t, &t->hist[op][sl_hist_bucket(bytes)], (uint64_t)n);
}

/* One message per block i < n of counts[i] x type size. */
void sl_hist_counts(int op, int64_t n, const void *counts, int large, MPI_Datatype datatype)
{
    for (int64_t i = 0; counts != NULL && i < n; i++)
        sl_count_hist(op, sl_type_bytes(count_at(counts, large, (int)i), datatype));
}

/* One message per block i < n of counts[i] x size(types[i]) (types: Fortran handles if
 * fortran). */
void sl_hist_w(int op, int64_t n, const void *counts, int large, const void *types, int fortran)
{
    for (int64_t i = 0; counts != NULL && types != NULL && i < n; i++)
        sl_count_hist(op, sl_type_bytes(count_at(counts, large, (int)i),
                                        type_at(types, fortran, (int)i)));
}
