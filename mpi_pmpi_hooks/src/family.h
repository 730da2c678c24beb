/*
 * family.h — communicator families: how each communicator of this rank was
 * made (wire table comm) and its point-to-point traffic (wire table
 * comm_p2p), so that traffic can be told per family ("rows", "columns",
 * "node-local", "tp") rather than per numeric communicator id.
 *
 * Family id: the communicators made by one creating call share it on every
 * member. A creating call is collective over its parent, so every member of
 * the parent counts the same number of earlier creating calls on it; the id
 * mixes the parent's communicator id (handles.h) with that number. An
 * intercommunicator's family is its own id (both sides agree on it).
 *
 * Descriptions: a bounded array (STACKLENS_MAX_KEYS entries) of wire records,
 * written under a mutex by the creating calls and MPI_Comm_set_name (rare
 * calls, never on a message path) and copied by the sender thread under the
 * same mutex; each entry has a revision, and the sender sends an entry whose
 * revision moved. A communicator beyond the bound has no description and
 * counts as a dropped key.
 *
 * Point-to-point per communicator: a keytab (keytab.h) keyed by (comm id, op,
 * peer world rank, sent or received), counted only for communicators other than
 * MPI_COMM_WORLD (whose messages are the p2p table's minus these), with one
 * overflow entry per op.
 */
#ifndef SL_FAMILY_H
#define SL_FAMILY_H

#include <mpi.h>
#include <stdint.h>

#include "keytab.h"
#include "stacklens_wire.h"

/* How a communicator was made: the wire's comm.made codes. */
enum sl_made {
    SL_MADE_WORLD = 1, SL_MADE_SPLIT, SL_MADE_SPLIT_TYPE, SL_MADE_CART_CREATE,
    SL_MADE_CART_SUB, SL_MADE_CREATE, SL_MADE_CREATE_GROUP, SL_MADE_DUP,
    SL_MADE_INTERCOMM_CREATE, SL_MADE_INTERCOMM_MERGE, SL_MADE_GRAPH, SL_MADE_FROM_GROUP
};

/* Key of a comm_p2p entry: two words, zero-filled. */
typedef struct sl_comm_p2p_key {
    uint32_t comm_id, op, peer, received;
} sl_comm_p2p_key;

enum { SL_CP2P_MSGS, SL_CP2P_BYTES, SL_CP2P_TIME /* ticks */, SL_CP2P_NVALS };

extern sl_keytab sl_comm_p2p;

/* Allocates both tables for max_keys entries and describes the world communicator
 * (sl_core.world_comm) if it holds the whole world; after sl_core_init. 0 or -1 (no
 * memory). */
int sl_family_init(unsigned max_keys);

/* Frees both tables. */
void sl_family_fini(void);

/*
 * Records that the call of op made newcomm from parent (MPI_COMM_NULL when
 * this rank got none: the parent's count of creating calls still moves).
 * color/key: a split's colour (or split type) and key; ndims/dims: a
 * Cart_create's grid, or a Cart_sub's remain_dims; site: the caller's return
 * address. Not on a message path: takes a mutex, may allocate a handle record.
 */
void sl_family_made(int op, MPI_Comm parent, MPI_Comm newcomm, int color, int key, int ndims,
                    const int *dims, const void *site);

/*
 * Records that MPI_Comm_create_from_group (MPI 4) made newcomm, at site. It has no
 * parent communicator: its family is its own id (the same on every member, as an
 * intercommunicator's). Not on a message path.
 */
void sl_family_from_group(MPI_Comm newcomm, const void *site);

/* MPI_Comm_set_name gave comm this name: its description carries it. */
void sl_family_named(MPI_Comm comm, const char *name);

/* Counts one message of op sent to (received 0) or received from (1) rank of comm
 * (not MPI_COMM_WORLD) with its bytes and the ticks inside the call. */
void sl_family_count(MPI_Comm comm, int op, int rank, int received, uint64_t bytes,
                     uint64_t ticks);

/* The cumulative counters of comm_p2p entry i: the shared ones plus every counter
 * block's row (relaxed loads; the sender thread). */
void sl_comm_p2p_load(unsigned i, uint64_t out[SL_CP2P_NVALS]);

/* sl_family_count for every communicator but MPI_COMM_WORLD (whose messages
 * need no entry of their own) and a real peer. */
static inline void sl_count_comm_p2p(MPI_Comm comm, int op, int rank, int received,
                                     uint64_t bytes, uint64_t ticks)
{
    if (comm != MPI_COMM_WORLD && rank >= 0)
        sl_family_count(comm, op, rank, received, bytes, ticks);
}

/* Sender thread: copies into out (room for max records) the descriptions whose
 * revision differs from seen[] (one per entry, updated for the copied ones);
 * returns how many were copied. */
unsigned sl_family_changed(sl_rec_comm *out, unsigned max, uint32_t *seen);

/* Entries of the description array (the size of the sender's seen[]). */
unsigned sl_family_capacity(void);

#endif /* SL_FAMILY_H */
