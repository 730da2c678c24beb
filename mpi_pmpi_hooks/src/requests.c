/*
 * requests.c — lock-free request and message tracking (see requests.h).
 */
#include "requests.h"

#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "handles.h"

#define SL_REQ_SLOTS  8192u  /* tracked requests at once (power of two) */
#define SL_MSG_SLOTS  1024u  /* matched messages at once */
#define SL_MAX_PROBE  64u
#define SL_EMPTY      ((uintptr_t)0)
#define SL_TOMB       ((uintptr_t)1)

enum { SL_REQ_RECV = 1, SL_REQ_SEND = 2 };

typedef struct sl_req_entry {
    uintptr_t key;       /* request handle; SL_EMPTY / SL_TOMB */
    int op;              /* op id that posted it */
    int kind;            /* SL_REQ_RECV or SL_REQ_SEND */
    int persistent;
    int peer;            /* persistent send: destination rank in comm */
    int64_t count;       /* persistent send: element count */
    MPI_Comm comm;
    MPI_Datatype datatype;
} sl_req_entry;

typedef struct sl_msg_entry {
    uintptr_t key;
    MPI_Comm comm;
} sl_msg_entry;

static sl_req_entry *reqs;
static sl_msg_entry *msgs;

/* Slot to start probing at for a handle. */
static unsigned home(uintptr_t key, unsigned slots)
{
    return (unsigned)(((uint64_t)key * 0x9E3779B97F4A7C15ull) >> 40) & (slots - 1);
}

/* Allocates both tables. */
int sl_requests_init(void)
{
    reqs = calloc(SL_REQ_SLOTS, sizeof *reqs);
    msgs = calloc(SL_MSG_SLOTS, sizeof *msgs);
    if (reqs == NULL || msgs == NULL) {
        sl_requests_fini();
        return -1;
    }
    return 0;
}

/* Frees both tables. */
void sl_requests_fini(void)
{
    free(reqs);
    free(msgs);
    reqs = NULL;
    msgs = NULL;
}

/*
 * Claims the slot of key (reusing a stale entry of the same key, an empty or
 * a removed slot); returns its index or -1 (table full: key dropped).
 */
static long claim(uintptr_t *keys, size_t stride, unsigned slots, uintptr_t key)
{
    unsigned i = home(key, slots);
    for (unsigned n = 0; n < SL_MAX_PROBE; n++, i = (i + 1) & (slots - 1)) {
        uintptr_t *k = (uintptr_t *)((char *)keys + (size_t)i * stride);
        uintptr_t cur = __atomic_load_n(k, __ATOMIC_ACQUIRE);
        if (cur == key)
            return i;
        if ((cur == SL_EMPTY || cur == SL_TOMB)
            && __atomic_compare_exchange_n(k, &cur, key, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
            return i;
    }
    sl_key_dropped();
    return -1;
}

/* Index of key's slot, or -1 if it is not tracked. */
static long lookup(uintptr_t *keys, size_t stride, unsigned slots, uintptr_t key)
{
    unsigned i = home(key, slots);
    for (unsigned n = 0; n < SL_MAX_PROBE; n++, i = (i + 1) & (slots - 1)) {
        uintptr_t cur = __atomic_load_n((uintptr_t *)((char *)keys + (size_t)i * stride),
                                        __ATOMIC_ACQUIRE);
        if (cur == key)
            return i;
        if (cur == SL_EMPTY)
            return -1;
    }
    return -1;
}

/* Releases slot i of a table. */
static void release(uintptr_t *keys, size_t stride, long i)
{
    __atomic_store_n((uintptr_t *)((char *)keys + (size_t)i * stride), SL_TOMB, __ATOMIC_RELEASE);
}

#define REQ_CLAIM(k)  claim(&reqs[0].key, sizeof *reqs, SL_REQ_SLOTS, (k))
#define REQ_LOOKUP(k) lookup(&reqs[0].key, sizeof *reqs, SL_REQ_SLOTS, (k))

/* Records a posted receive. */
void sl_req_track_recv(MPI_Request req, int op, MPI_Comm comm, MPI_Datatype datatype,
                       int persistent)
{
    if (req == MPI_REQUEST_NULL || reqs == NULL)
        return;
    long i = REQ_CLAIM(SL_HKEY(req));
    if (i < 0)
        return;
    sl_req_entry *e = &reqs[i];
    e->op = op;
    e->kind = SL_REQ_RECV;
    e->persistent = persistent;
    e->comm = comm;
    e->datatype = datatype;
}

/* Records a persistent send. */
void sl_req_track_send(MPI_Request req, int op, MPI_Comm comm, int peer, int64_t count,
                       MPI_Datatype datatype)
{
    if (req == MPI_REQUEST_NULL || reqs == NULL)
        return;
    long i = REQ_CLAIM(SL_HKEY(req));
    if (i < 0)
        return;
    sl_req_entry *e = &reqs[i];
    e->op = op;
    e->kind = SL_REQ_SEND;
    e->persistent = 1;
    e->comm = comm;
    e->peer = peer;
    e->count = count;
    e->datatype = datatype;
}

/* Counts a persistent send at MPI_Start, before the call (as posted: sl_count_send),
 * into its Send_init op. */
uint64_t sl_req_start(MPI_Request req)
{
    if (reqs == NULL)
        return 0;
    long i = REQ_LOOKUP(SL_HKEY(req));
    if (i < 0 || reqs[i].kind != SL_REQ_SEND)
        return 0;
    const sl_req_entry *e = &reqs[i];
    uint64_t bytes = sl_count_send(e->comm, e->peer, e->count, e->datatype);
    sl_count_sent(e->comm, e->peer, e->op, bytes, 0);
    if (e->peer != MPI_PROC_NULL)
        sl_count_completed(e->op, bytes);
    return bytes;
}

/* Drops a request from the table. */
void sl_req_forget(MPI_Request req)
{
    if (reqs == NULL)
        return;
    long i = REQ_LOOKUP(SL_HKEY(req));
    if (i >= 0)
        release(&reqs[0].key, sizeof *reqs, i);
}

/* Records the communicator of a matched message. */
void sl_msg_track(MPI_Message msg, MPI_Comm comm)
{
    if (msg == MPI_MESSAGE_NULL || msg == MPI_MESSAGE_NO_PROC || msgs == NULL)
        return;
    long i = claim(&msgs[0].key, sizeof *msgs, SL_MSG_SLOTS, SL_HKEY(msg));
    if (i >= 0)
        msgs[i].comm = comm;
}

/* Returns and forgets the communicator of a matched message. */
MPI_Comm sl_msg_take(MPI_Message msg)
{
    if (msgs == NULL)
        return MPI_COMM_NULL;
    long i = lookup(&msgs[0].key, sizeof *msgs, SL_MSG_SLOTS, SL_HKEY(msg));
    if (i < 0)
        return MPI_COMM_NULL;
    MPI_Comm comm = msgs[i].comm;
    release(&msgs[0].key, sizeof *msgs, i);
    return comm;
}

/* Empties a scan. */
static void scan_start(sl_reqscan *s)
{
    s->n = 0;
    s->index = s->index_inline;
    s->slot = s->slot_inline;
    s->statuses = NULL;
}

/* Moves a full scan's inline arrays to the heap, room for n; 0 if no memory. */
static __attribute__((noinline)) int scan_grow(sl_reqscan *s, int n)
{
    int *ni = malloc((size_t)n * sizeof *ni);
    unsigned *ns = malloc((size_t)n * sizeof *ns);
    if (ni == NULL || ns == NULL) {
        free(ni);
        free(ns);
        return 0;
    }
    memcpy(ni, s->index, (size_t)s->n * sizeof *ni);
    memcpy(ns, s->slot, (size_t)s->n * sizeof *ns);
    s->index = ni;
    s->slot = ns;
    return 1;
}

/* Slot of a tracked receive. */
long sl_req_recv_slot(MPI_Request req)
{
    if (reqs == NULL)
        return -1;
    long slot = REQ_LOOKUP(SL_HKEY(req));
    return slot >= 0 && reqs[slot].kind == SL_REQ_RECV ? slot : -1;
}

/* Adds request i of an array of n to the scan if it is a tracked receive;
 * returns 0 when no memory is left for it (the rest are not counted). */
static inline __attribute__((always_inline)) int scan_add(sl_reqscan *s, int n, int i,
                                                          MPI_Request req)
{
    if (req == MPI_REQUEST_NULL)
        return 1;
    long slot = sl_req_recv_slot(req);
    if (slot < 0)
        return 1;
    if (s->n == SL_SCAN_INLINE && s->index == s->index_inline && !scan_grow(s, n))
        return 0;
    s->index[s->n] = i;
    s->slot[s->n] = (unsigned)slot;
    s->n++;
    return 1;
}

/* Finds the tracked requests among rq[0..n). */
int sl_reqs_scan(sl_reqscan *s, int n, const MPI_Request *rq)
{
    scan_start(s);
    for (int i = 0; reqs != NULL && rq != NULL && i < n; i++)
        if (!scan_add(s, n, i, rq[i]))
            break;
    return s->n;
}

/* Finds the tracked requests among the Fortran handles rq[0..n). */
int sl_reqs_scan_f(sl_reqscan *s, int n, const MPI_Fint *rq)
{
    scan_start(s);
    for (int i = 0; reqs != NULL && rq != NULL && i < n; i++)
        if (!scan_add(s, n, i, PMPI_Request_f2c(rq[i])))
            break;
    return s->n;
}

/* A status array to read completions from when the caller ignores them. */
MPI_Status *sl_reqs_statuses(sl_reqscan *s, int n, MPI_Status *statuses)
{
    if (s->n == 0 || statuses != MPI_STATUSES_IGNORE || n <= 0)
        return statuses;
    MPI_Status *own = malloc((size_t)n * sizeof *own);
    if (own == NULL)
        return statuses;
    s->statuses = own;
    return own;
}

/* Counts completed request i from st, releasing a non-persistent entry. */
void sl_reqs_complete(sl_reqscan *s, int i, const MPI_Status *st)
{
    if (st == MPI_STATUS_IGNORE || st == NULL)
        return;
    for (int k = 0; k < s->n; k++) {
        if (s->index[k] != i)
            continue;
        sl_req_entry *e = &reqs[s->slot[k]];
        if (st->MPI_SOURCE != MPI_PROC_NULL)
            sl_count_completed(e->op, sl_count_recv(e->comm, st, e->datatype, e->op, 0));
        if (!e->persistent)
            release(&reqs[0].key, sizeof *reqs, (long)s->slot[k]);
        return;
    }
}

/* Counts every tracked request of a Waitall/Testall that completed. */
void sl_reqs_complete_all(sl_reqscan *s, const MPI_Status *statuses)
{
    if (statuses == MPI_STATUSES_IGNORE)
        return;
    for (int k = 0; k < s->n; k++)
        sl_reqs_complete(s, s->index[k], &statuses[s->index[k]]);
}

/* Frees the scan's arrays (sl_reqs_release found some). */
void sl_reqs_free(sl_reqscan *s)
{
    if (s->index != s->index_inline) {
        free(s->index);
        free(s->slot);
    }
    free(s->statuses);
}
