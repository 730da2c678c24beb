/*
 * frame.h — encodes wire frames (stacklens_wire.h) from the core counter
 * tables: each frame carries the deltas since the previous frame.
 * Used only by the sender thread.
 */
#ifndef SL_FRAME_H
#define SL_FRAME_H

#include <stddef.h>
#include <stdint.h>

#include "core.h"
#include "identity.h"

/* Monitored counters of one peer as of the last frame (monitored.h). */
typedef struct sl_monitored_sent {
    uint64_t bytes, msgs;
} sl_monitored_sent;

typedef struct sl_frame_builder {
    const sl_identity *id;
    char token[sizeof(((sl_frame_header *)0)->token)];
    sl_peer_counters *last_peer;     /* counters as of the last frame, world_size entries */
    sl_op_counters last_op[SL_OP_COUNT];
    uint64_t (*last_hist)[SL_HIST_BUCKETS]; /* SL_OP_COUNT rows */
    sl_rma_counters *last_rma;       /* world_size x SL_RMA_COUNT */
    uint64_t *last_coll;             /* coll entries x SL_COLL_NVALS */
    uint64_t *last_io;               /* io entries x SL_IO_NVALS */
    uint64_t *last_comm_p2p;         /* comm_p2p entries x SL_CP2P_NVALS (family.h) */
    uint32_t *comm_seen;             /* revision of each communicator description sent */
    uint64_t *last_site;             /* callsite entries x SL_SITE_NVALS (callsite.h) */
    uint64_t *site_now;              /* the same, this frame's reading (sl_site_load_all) */
    unsigned sites_described;        /* call-site paths [0, n) had their frames sent */
    sl_monitored_sent *last_monitored; /* world_size entries; NULL: traffic not monitored */
    sl_monitored_sent *now_monitored;  /* world_size entries: the frame's reading, taken
                                          before the peer table's (core.h, sl_count_send) */
    uint64_t last_health[3];         /* keys_dropped, frames_dropped, frames_spooled */
    const uint64_t *frames_dropped;  /* the sender's counters, read at each frame */
    const uint64_t *frames_spooled;
    unsigned char *scratch;          /* room for the largest possible frame */
    size_t scratch_size;
    int full;                        /* the frame being built had no room for a record */
    size_t health_offset;            /* of the last frame's health record, 0 if none */
    uint64_t next_seq;
    uint64_t interval_start_ns;      /* CLOCK_REALTIME end of the previous frame */
} sl_frame_builder;

/*
 * Prepares b for this rank (sl_core must be initialised). id must outlive b;
 * token is the ingest token field. Returns 0, or -1 if out of memory.
 */
int sl_frame_builder_init(sl_frame_builder *b, const sl_identity *id, const char *token);

/* Frees what sl_frame_builder_init allocated. */
void sl_frame_builder_fini(sl_frame_builder *b);

/*
 * Builds the next frame of type frame_type (an SL_FRAME_* of stacklens_wire.h):
 * header, the rank_info section if this is seq 0, then the p2p, op, hist,
 * coll, rma, io, comm, comm_p2p (family.h), callsite and callsite_frame (callsite.h), monitored (monitored.h: in every frame when monitored, even empty),
 * hca (ibport.h) and health records whose deltas are not all zero, and for SL_FRAME_aborted the abort record of errorcode. A body stays
 * within SL_BOUND_max_body_bytes: records that do not fit keep their deltas
 * for the next frame, *more is set, and the frame is then of type interval
 * whatever was asked (the caller builds again until *more is 0). Returns a
 * malloc'd buffer of *len bytes and its sequence number in *seq, or NULL if
 * out of memory (that frame's deltas are then lost; the seq is still used).
 * b->health_offset says where its health record is (0: none).
 */
unsigned char *sl_frame_build(sl_frame_builder *b, unsigned frame_type, int32_t errorcode,
                              size_t *len, uint64_t *seq, int *more);

/*
 * The frame that would end the rank if a signal killed it now, into out (cap bytes),
 * without touching b: of type killed, with b's next sequence number, the deltas since
 * b's last frame of the op and p2p tables only (records beyond cap are left out) and
 * rank_info if no frame was built yet. Returns its length, 0 if cap is too small for
 * the header and rank_info. For the crash snapshot (snapshot.h); sender thread only.
 */
size_t sl_frame_peek(const sl_frame_builder *b, unsigned char *out, size_t cap);

/* A frame the collector rejected (kept in the spool's rejected/, its counters
 * lost): the health counts it carried (keys folded, frames lost or spooled)
 * are carried again by the next frame, so the stored totals stay exact. */
void sl_frame_recredit(sl_frame_builder *b, const unsigned char *frame, size_t len);

#endif /* SL_FRAME_H */
