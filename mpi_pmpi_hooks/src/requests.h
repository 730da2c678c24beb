/*
 * requests.h — request tracking: a posted receive (Irecv, Imrecv,
 * Recv_init) or a persistent send (Send_init, ...) is remembered by its
 * request handle, so that the Wait/Test call that completes it can count the
 * received bytes and source from the status, and MPI_Start can count a
 * persistent send. Matched messages (Mprobe) are remembered with their
 * communicator for Mrecv/Imrecv.
 *
 * Lock-free: an open-addressing table of handle keys claimed with a CAS
 * (insert), read with acquire loads (lookup) and released with a tombstone
 * (completion). A full table drops the key (counted in keys_dropped): that
 * receive's bytes are then not seen. Requests completed by calls stacklens
 * does not wrap stay in the table until their handle value is reused.
 */
#ifndef SL_REQUESTS_H
#define SL_REQUESTS_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

/* Allocates the request and message tables; 0 or -1 (no memory). */
int sl_requests_init(void);

/* Frees the tables. */
void sl_requests_fini(void);

/* Tracks a posted receive of op on comm with datatype (persistent: Recv_init). */
void sl_req_track_recv(MPI_Request req, int op, MPI_Comm comm, MPI_Datatype datatype,
                       int persistent);

/* Tracks a persistent send of op (Send_init...): counted at each MPI_Start. */
void sl_req_track_send(MPI_Request req, int op, MPI_Comm comm, int peer, int64_t count,
                       MPI_Datatype datatype);

/* MPI_Start of req: counts a persistent send; returns its bytes (0 otherwise). */
uint64_t sl_req_start(MPI_Request req);

/* Forgets req: at MPI_Request_free, and for every new request stacklens does not count
 * at completion (Isend, Ibcast, ...), whose handle may be that of a receive completed
 * where the hooks could not see it (PMPI_Wait). */
void sl_req_forget(MPI_Request req);

/* Remembers the communicator of a matched message (Mprobe/Improbe). */
void sl_msg_track(MPI_Message msg, MPI_Comm comm);

/* The communicator of a matched message, forgetting it; MPI_COMM_NULL if unknown. */
MPI_Comm sl_msg_take(MPI_Message msg);

/* The requests of a completion call that stacklens tracks (found before the call). */
#define SL_SCAN_INLINE 16
typedef struct sl_reqscan {
    int n;                          /* tracked requests found */
    int *index;                     /* their positions in the request array */
    unsigned *slot;                 /* their table slots */
    int index_inline[SL_SCAN_INLINE];
    unsigned slot_inline[SL_SCAN_INLINE];
    void *statuses;                 /* status array substituted for MPI_STATUSES_IGNORE
                                       (C, or Fortran: see fortran.h) */
} sl_reqscan;

/* Looks up the n requests of reqs; returns the number that are tracked. */
int sl_reqs_scan(sl_reqscan *s, int n, const MPI_Request *reqs);

/* Table slot of req if it is a tracked receive, else -1. */
long sl_req_recv_slot(MPI_Request req);

/* sl_reqs_scan() of one request (Wait, Test), inline: one lookup call. */
static inline __attribute__((always_inline)) int sl_reqs_scan1(sl_reqscan *s,
                                                               const MPI_Request *req)
{
    s->n = 0;
    s->index = s->index_inline;
    s->slot = s->slot_inline;
    s->statuses = NULL;
    long slot = req != NULL && *req != MPI_REQUEST_NULL ? sl_req_recv_slot(*req) : -1;
    if (slot >= 0) {
        s->index[0] = 0;
        s->slot[0] = (unsigned)slot;
        s->n = 1;
    }
    return s->n;
}

/* The same for an array of n Fortran request handles. */
int sl_reqs_scan_f(sl_reqscan *s, int n, const MPI_Fint *reqs);

/* statuses, or (if MPI_STATUSES_IGNORE and tracked requests exist) an array of n. */
MPI_Status *sl_reqs_statuses(sl_reqscan *s, int n, MPI_Status *statuses);

/* Request i of the array completed with status st: counts a tracked receive. */
void sl_reqs_complete(sl_reqscan *s, int i, const MPI_Status *st);

/* All tracked requests completed with statuses[i] (Waitall, Testall). */
void sl_reqs_complete_all(sl_reqscan *s, const MPI_Status *statuses);

/* Frees what the scan allocated (the out-of-line part of sl_reqs_release). */
void sl_reqs_free(sl_reqscan *s);

/* Frees what the scan allocated: usually nothing, checked inline. */
static inline void sl_reqs_release(sl_reqscan *s)
{
    if (s->index != s->index_inline || s->statuses != NULL)
        sl_reqs_free(s);
}

#endif /* SL_REQUESTS_H */
