/*
 * coll.h — the key and counters of the coll table (wire table 5): one entry
 * per (communicator id, collective op, root world rank), with the
 * communicator's size in the key so that it travels with the entry; one
 * overflow entry per op (comm_id SL_BOUND_overflow_comm, no root, size 0).
 */
#ifndef SL_COLL_H
#define SL_COLL_H

#include <stdint.h>

#include "keytab.h"
#include "stacklens_wire.h"

typedef struct sl_coll_key {
    uint32_t comm_id;   /* see handles.h; SL_BOUND_overflow_comm = overflow */
    uint32_t op;        /* op id */
    uint32_t root;      /* world rank of the root, SL_BOUND_no_rank = none */
    uint32_t size;      /* ranks in the communicator */
} sl_coll_key;

enum { SL_COLL_CALLS, SL_COLL_BYTES, SL_COLL_TIME /* ticks */, SL_COLL_NVALS };

extern sl_keytab sl_coll;

#endif /* SL_COLL_H */
