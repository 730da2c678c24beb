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
 * also has per-file I/O counter rows (io.h, sl_tls_io), used the same way. Everything
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

#include "sl_ops.h"
#include "util.h"

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

/* Size buckets of the histogram: 0 for 0 bytes, b for [2^(b-1), 2^b). */
#define SL_HIST_BUCKETS 65

/* The counters every call updates: per op, and per op and size bucket. */
typedef struct sl_call_counters {
    sl_op_counters ops[SL_OP_COUNT];
    uint64_t hist[SL_OP_COUNT][SL_HIST_BUCKETS];
} sl_call_counters;

typedef struct sl_core_state {
    int ready;                /* 1 while wrappers count (atomic; set last at init) */
    int world_rank;
    int world_size;
    MPI_Group world_group;    /* group of MPI_COMM_WORLD, for rank translation */
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

/* Creates the key that hands a thread's block back at its exit; once (at
 * library load for file I/O, at MPI init), before any block is claimed. */
void sl_threads_init(void);

/* Claims a free counter block for this thread (&sl_core.calls if none is
 * free), sets sl_tls_calls and sl_tls_io and returns the call counters.
 * Lock-free; once per thread. */
sl_call_counters *sl_thread_claim(void);

/* Blocks [0, n) were ever claimed: the ones a reader sums. */
unsigned sl_thread_blocks_used(void);

/* Adds n to a counter only this thread writes (its block): a plain load and
 * store, no lock prefix (relaxed atomics: a reader on another thread sees
 * the old or the new value, never a torn one). */
static inline void sl_own_add(uint64_t *c, uint64_t n)
{
    __atomic_store_n(c, __atomic_load_n(c, __ATOMIC_RELAXED) + n, __ATOMIC_RELAXED);
}

/* One wrapped call in progress: its start and end in ticks (util.h). */
typedef struct sl_call {
    uint64_t t0, t1;
} sl_call;

/*
 * Starts counting a call. Returns 1 if the call is to be counted (stacklens
 * is running and this thread is not already inside a wrapper); the caller
 * must then call sl_mark_end() after the PMPI call and sl_leave() at the end.
 * Returns 0 if the wrapper must simply forward to PMPI.
 */
static inline int sl_enter(sl_call *call)
{
    if (sl_tls_in_call || !__atomic_load_n(&sl_core.ready, __ATOMIC_ACQUIRE))
        return 0;
    sl_tls_in_call = 1;
    call->t0 = sl_ticks();
    return 1;
}

/* Marks the end of the PMPI call (the time counted as "inside the call"). */
static inline void sl_mark_end(sl_call *call)
{
    call->t1 = sl_ticks();
}

/* Ticks inside the call (between sl_enter and sl_mark_end). */
static inline uint64_t sl_call_ticks(const sl_call *call)
{
    return sl_ticks_between(call->t0, call->t1);
}

/* This thread's call counters, claimed at its first counted call. */
static inline sl_call_counters *sl_my_calls(void)
{
    sl_call_counters *t = sl_tls_calls;
    return __builtin_expect(t != NULL, 1) ? t : sl_thread_claim();
}

/* Adds n to counter c of t (from sl_my_calls): a plain load and store in
 * the thread's own block (the sender only reads it), else an atomic add. */
static inline void sl_calls_add(sl_call_counters *t, uint64_t *c, uint64_t n)
{
    if (__builtin_expect(t != &sl_core.calls, 1))
        sl_own_add(c, n);
    else if (n != 0)
        __atomic_fetch_add(c, n, __ATOMIC_RELAXED);
}

/* Adds one call of op with its bytes and time, and leaves the wrapper. */
static inline void sl_leave(sl_call *call, int op, uint64_t bytes)
{
    sl_call_counters *t = sl_my_calls();
    sl_op_counters *c = &t->ops[op];
    sl_calls_add(t, &c->calls, 1);
    sl_calls_add(t, &c->bytes, bytes);
    sl_calls_add(t, &c->ticks, sl_call_ticks(call));
    sl_tls_in_call = 0;
}

/* Histogram bucket of a message of bytes: 0, or 1 + floor(log2(bytes)). */
static inline unsigned sl_hist_bucket(uint64_t bytes)
{
    return bytes == 0 ? 0u : 64u - (unsigned)__builtin_clzll(bytes);
}

/* Counts one message of bytes of op in the size histogram. */
static inline void sl_count_hist(int op, uint64_t bytes)
{
    sl_call_counters *t = sl_my_calls();
    sl_calls_add(t, &t->hist[op][sl_hist_bucket(bytes)], 1);
}

/* sl_leave() for a call that moves one message (or buffer) of bytes: also
 * counts it in the size histogram of op. */
static inline void sl_leave_sized(sl_call *call, int op, uint64_t bytes)
{
    sl_count_hist(op, bytes);
    sl_leave(call, op, bytes);
}

/* Adds bytes received at completion of a request posted by op (Irecv, ...):
 * the op's bytes and histogram, not its calls or time. */
static inline void sl_count_completed(int op, uint64_t bytes)
{
    sl_call_counters *t = sl_my_calls();
    sl_calls_add(t, &t->ops[op].bytes, bytes);
    sl_calls_add(t, &t->hist[op][sl_hist_bucket(bytes)], 1);
}

/* Counts one key that could not get its own table entry. */
static inline void sl_key_dropped(void)
{
    __atomic_fetch_add(&sl_core.keys_dropped, 1, __ATOMIC_RELAXED);
}

/*
 * Allocates the tables for MPI_COMM_WORLD, with at most max_keys
 * communicators/windows and collective keys; call after PMPI_Init. Returns 0
 * on success, -1 (with a warning) if memory or an MPI query failed.
 */
int sl_core_init(unsigned max_keys);

/*
 * Frees the tables and the world group; the wrappers must already have
 * stopped counting and MPI must not be finalized yet.
 */
void sl_core_fini(void);

/* Bytes of count elements of datatype; 0 for count <= 0 or a null type.
 * Common predefined types are looked up in a small table filled at init
 * (they are never freed), others with PMPI_Type_size. */
uint64_t sl_type_bytes(int64_t count, MPI_Datatype datatype);

/*
 * World rank of rank in comm (the remote group for an intercommunicator);
 * -1 for MPI_PROC_NULL, MPI_ANY_SOURCE or a rank outside MPI_COMM_WORLD.
 */
int sl_world_rank(MPI_Comm comm, int rank);

/*
 * Counts one message of count elements of datatype sent to rank of comm.
 * Returns its bytes; 0 for MPI_PROC_NULL, where nothing is sent.
 */
uint64_t sl_count_send(MPI_Comm comm, int rank, int64_t count, MPI_Datatype datatype);

/*
 * Counts one received message described by status (source and size),
 * received with datatype on comm. Returns the bytes received.
 */
uint64_t sl_count_recv(MPI_Comm comm, const MPI_Status *status, MPI_Datatype datatype);

/*
 * Counts one RMA call of rma_slot (SL_RMA_*) moving bytes to rank of the
 * window win's group. Returns bytes.
 */
uint64_t sl_count_rma(MPI_Win win, int rank, int rma_slot, uint64_t bytes);

/*
 * Counts one collective call of op on comm: root is the root's rank in comm
 * (or -1 when the op has none), bytes what this rank handed to it, ticks
 * the time inside. Per (communicator id, op, root) in the coll table.
 */
void sl_count_coll(MPI_Comm comm, int op, int root, uint64_t bytes, uint64_t ticks);

/* Bytes helpers for the bytes= modes of the spec (contract/templates/bytes_modes.in).
 * counts are MPI_Count (large) or int; the types of the w modes are Fortran handles
 * (MPI_Fint) when fortran is 1, else MPI_Datatype. */
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

/* Copies the current cumulative counters of peer world rank i. */
void sl_core_load_peer(int i, sl_peer_counters *out);

/* Copies the current cumulative counters of op i: the shared counters plus
 * every thread block. */
void sl_core_load_op(int i, sl_op_counters *out);

/* The current cumulative count of histogram bucket k of op (summed likewise). */
uint64_t sl_core_load_hist(int op, int k);

#endif /* SL_CORE_H */
