/*
 * core.h — per-rank counter state of libstacklens and the counting API the
 * generated MPI wrappers call.
 *
 * Tables (cumulative since MPI_Init, never reset):
 *   per peer world rank: bytes/messages sent and received (point-to-point),
 *   per operation (op id from sl_ops.h): calls, bytes, ticks inside the call,
 *   per operation and log2 size bucket: messages (the size histogram),
 *   per target world rank and RMA op: calls, bytes,
 *   per (communicator, collective op, root): calls, bytes, ticks (a keytab,
 *   see coll.h), and the health counters (keys dropped into overflow keys).
 * Times are in ticks (util.h); the sender converts deltas to ns.
 * The per-op and histogram counters (sl_call_counters) of a call go to a
 * counter block of the calling thread (one of SL_THREAD_BLOCKS, claimed at
 * the thread's first counted call, handed back at thread exit): only that
 * thread writes it, so it adds with plain relaxed stores, no lock prefix.
 * Threads beyond the pool add to the shared sl_core.calls with relaxed
 * atomic adds; a reader sums the shared counters and the blocks. A block
 * also has per-file I/O counter rows (io.h, sl_tls_io) and per-peer
 * point-to-point rows (sl_tls_peers), used the same way. Everything
 * else on the MPI call path is relaxed atomic adds into the shared tables:
 * no locks, no allocation, no I/O (a new communicator or collective key
 * takes a mutex once, see handles.h and keytab.h). The sender thread reads them with relaxed
 * atomic loads and sends differences; a reader may see one counter of a
 * message updated and its neighbour not yet, which the next interval's delta
 * carries, so sums over intervals stay exact.
 *
 * A per-thread flag marks "inside a wrapper": an MPI call that the MPI
 * library itself makes from inside a wrapped call is forwarded uncounted.
 */
#ifndef SL_CORE_H
#define SL_CORE_H

#include <mpi.h>
#include <stdint.h>

#include "callsite.h"
#include "family.h"
#include "sl_ops.h"
#include "stacklens_wire.h"
#include "util.h"

/* The helpers of the counted call paths (MPI here, I/O in posix.c): always
 * inlined into the wrappers (GCC otherwise keeps sl_leave out of line in the
 * generated file: a call and a stack frame more per MPI call; bench/RESULTS.md,
 * "Hot path of the MPI wrappers"). */
#define SL_HOT inline __attribute__((always_inline))

/* Cumulative point-to-point counters towards one peer world rank. */
typedef struct sl_peer_counters {
    uint64_t bytes_sent, msgs_sent, bytes_recv, msgs_recv;
} sl_peer_counters;

/* Cumulative counters of one MPI operation (time in ticks, see util.h). */
typedef struct sl_op_counters {
    uint64_t calls, bytes, ticks;
} sl_op_counters;

/* Cumulative RMA counters towards one target world rank for one RMA op. */
typedef struct sl_rma_counters {
    uint64_t calls, bytes;
} sl_rma_counters;

/* Size buckets of the histogram: 0 for 0 bytes, b for [2^(b-1), 2^b), up to the
 * wire's bound. */
#define SL_HIST_BUCKETS (SL_BOUND_max_bucket + 1)

/* The counters every call updates: per op, and per op and size bucket. */
typedef struct sl_call_counters {
    sl_op_counters ops[SL_OP_COUNT];
    uint64_t hist[SL_OP_COUNT][SL_HIST_BUCKETS];
} sl_call_counters;

typedef struct sl_core_state {
    int ready;                /* 1 while wrappers count (atomic; set last at init) */
    int world_rank;
    int world_size;
    MPI_Comm world_comm;      /* the world: MPI_COMM_WORLD, or a session's (sessions.h) */
    MPI_Group world_group;    /* the launch's processes (world ranks), for rank translation:
                                 world_comm's group, or a session's mpi://WORLD */
    sl_peer_counters *peers;  /* world_size entries */
    sl_rma_counters *rma;     /* world_size x SL_RMA_COUNT entries */
    sl_call_counters calls;   /* of threads without a block of their own */
    uint64_t keys_dropped;    /* new keys folded into an overflow key (all tables) */
} sl_core_state;

/* Threads with a counter block of their own; more threads share sl_core.calls. */
#define SL_THREAD_BLOCKS 16

extern sl_core_state sl_core;
/* Initial-exec TLS: one %fs-relative access, no __tls_get_addr call (the
 * library is preloaded, so its TLS is in the static block). */
extern __thread int sl_tls_in_call __attribute__((tls_model("initial-exec")));
/* This thread's call counters: its block, &sl_core.calls (no block was
 * free), or NULL before its first counted call. */
extern __thread sl_call_counters *sl_tls_calls __attribute__((tls_model("initial-exec")));
/* This thread's I/O counter rows (its block's, see io.h), or NULL (shared
 * counters); set with sl_tls_calls. */
extern __thread uint64_t *sl_tls_io __attribute__((tls_model("initial-exec")));

/* This thread's rows of the peer table (world_size of them, its block's), or
 * NULL: not resolved yet, or the thread has no block (then the shared
 * sl_core.peers with atomic adds). Set by sl_thread_peers. */
extern __thread sl_peer_counters *sl_tls_peers __attribute__((tls_model("initial-exec")));

/* 1 + the index of this thread's counter block (< SL_THREAD_BLOCKS); 0 before
 * its first counted call and for a thread without a block. Set with sl_tls_calls. */
extern __thread int sl_tls_block __attribute__((tls_model("initial-exec")));

/* Creates the key that hands a thread's block back at its exit; once (at
 * library load for file I/O, at MPI init), before any block is claimed. */
void sl_threads_init(void);

/* Claims a free counter block for this thread (&sl_core.calls if none is
 * free), sets sl_tls_calls, sl_tls_io and sl_tls_block and returns the call counters.
 * Lock-free; once per thread. */
sl_call_counters *sl_thread_claim(void);

/* Blocks [0, n) were ever claimed: the ones a reader sums. */
unsigned sl_thread_blocks_used(void);

/* Adds n to a counter only this thread writes (its block): a plain load and
 * store, no lock prefix (relaxed atomics: a reader on another thread sees
 * the old or the new value, never a torn one). */
static SL_HOT void sl_own_add(uint64_t *c, uint64_t n)
{
    __atomic_store_n(c, __atomic_load_n(c, __ATOMIC_RELAXED) + n, __ATOMIC_RELAXED);
}

/* One wrapped call in progress: its start and end in ticks (util.h), its call site
 * (the wrapper's return address) and, for a collective, its communicator id
 * (SL_BOUND_no_comm otherwise). */
typedef struct sl_call {
    uint64_t t0, t1;
    const void *site;
    uint32_t comm;
} sl_call;

/*
 * Starts counting a call. Returns 1 if the call is to be counted (stacklens
 * is running and this thread is not already inside a wrapper); the caller
 * must then call sl_mark_end() after the PMPI call and sl_leave() at the end.
 * Returns 0 if the wrapper must simply forward to PMPI. site is the call site:
 * the wrapper's __builtin_return_address(0) (a Fortran entry point's, passed on).
 */
static SL_HOT int sl_enter(sl_call *call, const void *site)
{
    if (sl_tls_in_call || !__atomic_load_n(&sl_core.ready, __ATOMIC_ACQUIRE))
        return 0;
    sl_tls_in_call = 1;
    call->site = site;
    call->comm = (uint32_t)SL_BOUND_no_comm;
    call->t0 = sl_ticks();
    return 1;
}

/* Marks the end of the PMPI call (the time counted as "inside the call"). */
static SL_HOT void sl_mark_end(sl_call *call)
{
    call->t1 = sl_ticks();
}

/* Ticks inside the call (between sl_enter and sl_mark_end). */
static SL_HOT uint64_t sl_call_ticks(const sl_call *call)
{
    return sl_ticks_between(call->t0, call->t1);
}

/* This thread's call counters, claimed at its first counted call. */
static SL_HOT sl_call_counters *sl_my_calls(void)
{
    sl_call_counters *t = sl_tls_calls;
    return __builtin_expect(t != NULL, 1) ? t : sl_thread_claim();
}

/* Adds n to counter c of t (from sl_my_calls): a plain load and store in
 * the thread's own block (the sender only reads it), else an atomic add. */
static SL_HOT void sl_calls_add(sl_call_counters *t, uint64_t *c, uint64_t n)
{
    if (__builtin_expect(t != &sl_core.calls, 1))
        sl_own_add(c, n);
    else if (n != 0)
        __atomic_fetch_add(c, n, __ATOMIC_RELAXED);
}

/* Histogram bucket of a message of bytes: 0, or 1 + floor(log2(bytes)). */
static SL_HOT unsigned sl_hist_bucket(uint64_t bytes)
{
    return bytes == 0 ? 0u : 64u - (unsigned)__builtin_clzll(bytes);
}

/* Counts one call of op (of layer: SL_SITE_MPI, or an I/O layer with an I/O function
 * index) at call site pc on communicator comm (no_comm) with its bytes and ticks in the
 * call-site table (callsite.h): a hit in this thread's cache (depth 1 only; never a call
 * from mpi4py's module, whose site is its Python line) is three plain adds into the
 * slot. The cache is NULL while call sites are off, so a hit tests nothing else; off
 * costs that test and the depth's. */
static SL_HOT void sl_site_count(const void *pc, unsigned layer, unsigned op, uint32_t comm,
                                 uint64_t bytes, uint64_t ticks)
{
    unsigned bucket = sl_hist_bucket(bytes);
    sl_site_slot *cache = sl_tls_site_cache;
    if (__builtin_expect(cache != NULL, 1)) {
        uint64_t tag = sl_site_tag(layer, op, comm, bucket);
        sl_site_slot *s = &cache[sl_site_slot_of(pc, tag)];
        if (__builtin_expect(s->pc == pc && s->tag == tag, 1)) {
            sl_own_add(&s->vals[SL_SITE_CALLS], 1);
            sl_own_add(&s->vals[SL_SITE_BYTES], bytes);
            sl_own_add(&s->vals[SL_SITE_TICKS], ticks);
            return;
        }
    } else if (sl_site_depth == 0) {
        return;
    }
    sl_site_count_slow(pc, layer, op, comm, bucket, bytes, ticks);
}

/* Adds one call of op with its bytes and time to t (from sl_my_calls), and one
 * message of bytes to its size histogram if sized: one test of whose counters
 * t are for all of them. */
static SL_HOT void sl_calls_count(sl_call_counters *t, const sl_call *call, int op,
                                  uint64_t bytes, int sized)
{
    sl_op_counters *c = &t->ops[op];
    uint64_t *h = &t->hist[op][sl_hist_bucket(bytes)];
    uint64_t ticks = sl_call_ticks(call);
    sl_site_count(call->site, SL_SITE_MPI, (unsigned)op, call->comm, bytes, ticks);
    if (__builtin_expect(t != &sl_core.calls, 1)) {
        sl_own_add(&c->calls, 1);
        sl_own_add(&c->bytes, bytes);
        sl_own_add(&c->ticks, ticks);
        if (sized)
            sl_own_add(h, 1);
        return;
    }
    __atomic_fetch_add(&c->calls, 1, __ATOMIC_RELAXED);
    if (bytes != 0)
        __atomic_fetch_add(&c->bytes, bytes, __ATOMIC_RELAXED);
    if (ticks != 0)
        __atomic_fetch_add(&c->ticks, ticks, __ATOMIC_RELAXED);
    if (sized)
        __atomic_fetch_add(h, 1, __ATOMIC_RELAXED);
}

/* Adds one call of op with its bytes and time, and leaves the wrapper. */
static SL_HOT void sl_leave(sl_call *call, int op, uint64_t bytes)
{
    sl_calls_count(sl_my_calls(), call, op, bytes, 0);
    sl_tls_in_call = 0;
}


/* Counts one message of bytes of op in the size histogram. */
static SL_HOT void sl_count_hist(int op, uint64_t bytes)
{
    sl_call_counters *t = sl_my_calls();
    sl_calls_add(t, &t->hist[op][sl_hist_bucket(bytes)], 1);
}

/* sl_leave() for a call that moves one message (or buffer) of bytes: also
 * counts it in the size histogram of op. */
static SL_HOT void sl_leave_sized(sl_call *call, int op, uint64_t bytes)
{
    sl_calls_count(sl_my_calls(), call, op, bytes, 1);
    sl_tls_in_call = 0;
}

/* Adds bytes received at completion of a request posted by op (Irecv, ...):
 * the op's bytes and histogram, not its calls or time. */
static SL_HOT void sl_count_completed(int op, uint64_t bytes)
{
    sl_call_counters *t = sl_my_calls();
    sl_calls_add(t, &t->ops[op].bytes, bytes);
    sl_calls_add(t, &t->hist[op][sl_hist_bucket(bytes)], 1);
}

/* Resolves sl_tls_peers (the rows of this thread's block) once the tables
 * exist; returns it, NULL for a thread without a block. */
sl_peer_counters *sl_thread_peers(void);

/* Adds one message of bytes to or from world rank peer: in this thread's own
 * peer rows with plain stores (no lock prefix), else with atomic adds into
 * the shared rows. */
static SL_HOT void sl_count_peer(int peer, int received, uint64_t bytes)
{
    sl_peer_counters *own = sl_tls_peers;
    if (__builtin_expect(own == NULL, 0))
        own = sl_thread_peers();
    if (__builtin_expect(own != NULL, 1)) {
        sl_peer_counters *p = &own[peer];
        sl_own_add(received ? &p->bytes_recv : &p->bytes_sent, bytes);
        sl_own_add(received ? &p->msgs_recv : &p->msgs_sent, 1);
        return;
    }
    sl_peer_counters *p = &sl_core.peers[peer];
    __atomic_fetch_add(received ? &p->bytes_recv : &p->bytes_sent, bytes, __ATOMIC_RELAXED);
    __atomic_fetch_add(received ? &p->msgs_recv : &p->msgs_sent, 1, __ATOMIC_RELAXED);
}

/* Counts one key that could not get its own table entry. */
static inline void sl_key_dropped(void)
{
    __atomic_fetch_add(&sl_core.keys_dropped, 1, __ATOMIC_RELAXED);
}

/*
 * Allocates the tables for the world (world_comm and world_group set: the group's
 * rank and size are the world rank and size), with at most max_keys
 * communicators/windows and collective keys; call after PMPI_Init. Returns 0
 * on success, -1 (with a warning, world_group freed) if memory or an MPI query failed.
 */
int sl_core_init(unsigned max_keys);

/*
 * Frees the tables and the world group; the wrappers must already have
 * stopped counting and MPI must not be finalized yet.
 */
void sl_core_fini(void);

/* Sizes of the most common predefined datatypes (never freed), filled once by
 * sl_core_init: sl_type_cache_n entries, published with a release store. */
#define SL_TYPE_CACHE 8
typedef struct sl_type_size {
    MPI_Datatype type;
    int size;
} sl_type_size;
extern sl_type_size sl_type_cache[SL_TYPE_CACHE];
extern int sl_type_cache_n;

/* sl_type_bytes() of a type not in the cache: PMPI_Type_size. */
uint64_t sl_type_bytes_queried(int64_t count, MPI_Datatype datatype);

/* Bytes of count elements of datatype; 0 for count <= 0 or a null type.
 * Common predefined types are looked up in sl_type_cache, others with
 * PMPI_Type_size. */
static SL_HOT uint64_t sl_type_bytes(int64_t count, MPI_Datatype datatype)
{
    if (count <= 0 || datatype == MPI_DATATYPE_NULL)
        return 0;
    int n = __atomic_load_n(&sl_type_cache_n, __ATOMIC_ACQUIRE);
    for (int i = 0; i < n; i++)
        if (sl_type_cache[i].type == datatype)
            return (uint64_t)count * (uint64_t)sl_type_cache[i].size;
    return sl_type_bytes_queried(count, datatype);
}

/* sl_world_rank() of a communicator other than MPI_COMM_WORLD and
 * MPI_COMM_SELF: its cached record (handles.h). */
int sl_world_rank_cached(MPI_Comm comm, int rank);

/*
 * World rank of rank in comm (the remote group for an intercommunicator);
 * -1 for MPI_PROC_NULL, MPI_ANY_SOURCE or a rank outside MPI_COMM_WORLD.
 * MPI_COMM_WORLD and MPI_COMM_SELF need no lookup.
 */
static SL_HOT int sl_world_rank(MPI_Comm comm, int rank)
{
    if (rank < 0) /* MPI_PROC_NULL, MPI_ANY_SOURCE, MPI_ROOT are negative */
        return -1;
    if (comm == MPI_COMM_WORLD)
        return rank < sl_core.world_size ? rank : -1;
    if (comm == MPI_COMM_SELF)
        return rank == 0 ? sl_core.world_rank : -1;
    return sl_world_rank_cached(comm, rank);
}

/*
 * Counts one message of count elements of datatype sent to rank of comm in the
 * peer table as it is posted: before the MPI call that sends it. The MPI's
 * monitoring (monitored.h) counts the message inside that call (a blocking
 * send's as it starts, which may be long before the call returns), and a frame
 * reads the monitored counters before the peer table (frame.c): so a frame that
 * carries a message's monitored bytes carries its point-to-point bytes too, and
 * the monitored bytes beyond them (collectives' own messages) are never a sent
 * message's. Returns its bytes; 0 for MPI_PROC_NULL, where nothing is sent. A
 * call that then fails stays counted (the default error handler aborts first).
 */
static SL_HOT uint64_t sl_count_send(MPI_Comm comm, int rank, int64_t count,
                                     MPI_Datatype datatype)
{
    if (rank == MPI_PROC_NULL)
        return 0;
    uint64_t bytes = sl_type_bytes(count, datatype);
    int peer = sl_world_rank(comm, rank);
    if (peer >= 0)
        sl_count_peer(peer, 0, bytes);
    /* the count is visible before the MPI monitors the message (frame.c reads with an
     * acquire fence between the two): no instruction on x86, a barrier elsewhere */
    __atomic_thread_fence(__ATOMIC_RELEASE);
    return bytes;
}

/*
 * After the call that sent a message counted by sl_count_send (bytes) by op: on
 * a communicator other than MPI_COMM_WORLD, its bytes with the ticks inside the
 * call in its comm_p2p entry (family.h); nothing for MPI_PROC_NULL.
 */
static SL_HOT void sl_count_sent(MPI_Comm comm, int rank, int op, uint64_t bytes,
                                 uint64_t ticks)
{
    if (rank != MPI_PROC_NULL)
        sl_count_comm_p2p(comm, op, rank, 0, bytes, ticks);
}

#if !defined(OPEN_MPI) && !defined(MPICH_VERSION)
/* sl_status_bytes() through the MPI: PMPI_Get_count in bytes, elements x type
 * size for 2 GiB or more (MPIs whose status layout is not known here). */
uint64_t sl_status_bytes_queried(const MPI_Status *status, MPI_Datatype datatype);
#endif

/*
 * Bytes received as status says (the bytes of the type signature, what
 * MPI_Get_count with MPI_BYTE answers): read from the status itself where the
 * MPI's layout is known — Open MPI's _ucount, MPICH's count_lo and the high
 * bits of count_hi_and_cancelled are the received bytes, exact at any size —
 * else asked of the MPI.
 */
static SL_HOT uint64_t sl_status_bytes(const MPI_Status *status, MPI_Datatype datatype)
{
#if defined(OPEN_MPI)
    (void)datatype;
    return (uint64_t)status->_ucount;
#elif defined(MPICH_VERSION)
    (void)datatype;
    return (uint64_t)(uint32_t)status->count_lo
           | ((uint64_t)((uint32_t)status->count_hi_and_cancelled >> 1) << 32);
#else
    return sl_status_bytes_queried(status, datatype);
#endif
}

/*
 * Counts one received message described by status (source and size),
 * received with datatype on comm by op (ticks: the time inside the call, 0
 * for a completion or the receive half of a Sendrecv; comm_p2p as for
 * sl_count_send). Returns the bytes received.
 */
static SL_HOT uint64_t sl_count_recv(MPI_Comm comm, const MPI_Status *status,
                                     MPI_Datatype datatype, int op, uint64_t ticks)
{
    if (status->MPI_SOURCE == MPI_PROC_NULL)
        return 0;
    uint64_t bytes = sl_status_bytes(status, datatype);
    int peer = sl_world_rank(comm, status->MPI_SOURCE);
    if (peer >= 0)
        sl_count_peer(peer, 1, bytes);
    sl_count_comm_p2p(comm, op, status->MPI_SOURCE, 1, bytes, ticks);
    return bytes;
}

/*
 * Counts one RMA call of rma_slot (SL_RMA_*) moving bytes to rank of the
 * window win's group. Returns bytes.
 */
uint64_t sl_count_rma(MPI_Win win, int rank, int rma_slot, uint64_t bytes);

/*
 * Counts one collective call of op on comm: root is the root's rank in comm
 * (or -1 when the op has none), bytes what this rank handed to it, ticks
 * the time inside. Per (communicator id, op, root) in the coll table. Returns
 * the communicator's id (SL_BOUND_no_comm if it has none: its call site then
 * keeps no communicator).
 */
uint32_t sl_count_coll(MPI_Comm comm, int op, int root, uint64_t bytes, uint64_t ticks);

/* Ranks of comm (the remote group of an intercommunicator), its topology's
 * out-degree, and whether this process is root of comm (root may be MPI_ROOT). */
int64_t sl_comm_ranks(MPI_Comm comm);
int64_t sl_out_degree(MPI_Comm comm);
int sl_is_root(MPI_Comm comm, int root);

/* counts are MPI_Count (large) or int; the types of the w modes are Fortran handles
 * (MPI_Fint) when fortran is 1, else MPI_Datatype. */

/* Message helpers of the collectives (contract/templates/messages_modes.in): n
 * messages of bytes each; one per block of counts[i] x type (or types[i]). */
void sl_hist_blocks(int op, int64_t n, uint64_t bytes);
void sl_hist_counts(int op, int64_t n, const void *counts, int large, MPI_Datatype datatype);
void sl_hist_w(int op, int64_t n, const void *counts, int large, const void *types, int fortran);

/* Bytes helpers for the bytes= modes of the spec (contract/templates/bytes_modes.in). */
uint64_t sl_bytes_all(MPI_Comm comm, int64_t count, MPI_Datatype datatype);
uint64_t sl_bytes_root_all(MPI_Comm comm, int root, int64_t count, MPI_Datatype datatype);
uint64_t sl_bytes_sum(MPI_Comm comm, const void *counts, int large, MPI_Datatype datatype);
uint64_t sl_bytes_root_sum(MPI_Comm comm, int root, const void *counts, int large,
                           MPI_Datatype datatype);
uint64_t sl_bytes_w(MPI_Comm comm, const void *counts, int large, const void *types, int fortran);
uint64_t sl_bytes_nbr(MPI_Comm comm, int64_t count, MPI_Datatype datatype);
uint64_t sl_bytes_nbr_sum(MPI_Comm comm, const void *counts, int large, MPI_Datatype datatype);
uint64_t sl_bytes_nbr_w(MPI_Comm comm, const void *counts, int large, const void *types,
                        int fortran);

/* Copies the current cumulative counters of peer world rank i: the shared
 * counters plus every thread block's row. */
void sl_core_load_peer(int i, sl_peer_counters *out);

/* Copies the current cumulative counters of op i: the shared counters plus
 * every thread block. */
void sl_core_load_op(int i, sl_op_counters *out);

/* The current cumulative count of histogram bucket k of op (summed likewise). */
uint64_t sl_core_load_hist(int op, int k);

#endif /* SL_CORE_H */
