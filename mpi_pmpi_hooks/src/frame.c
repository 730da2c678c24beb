/*
 * frame.c — builds delta frames from the cumulative core tables (see
 * frame.h). Layout: sl_frame_header, then sections of
 * {u16 table id, u16 record size, u32 count, records}; empty sections are
 * left out, except the monitored section of a rank whose MPI monitors its
 * traffic (empty there means "nothing sent"). Times are counted in ticks
 * (util.h): each time delta is converted to ns here, once, at the ratio
 * calibrated when the frame is built.
 */
#include "frame.h"

#include "callsite.h"

#include <stdlib.h>
#include <string.h>

#include "callsite.h"
#include "coll.h"
#include "family.h"
#include "ibport.h"
#include "io.h"
#include "monitored.h"
#include "snapshot.h"

/* Bytes of the sections every frame can always carry after the counter tables: the
 * monitored section's header (present even when none of its records fits), the host's
 * ports, health and abort (a frame's tables stop short of them). */
#define SL_TAIL_SIZE (SL_SECTION_HEADER_SIZE + SL_IBPORT_MAX_SECTION + SL_SECTION_HEADER_SIZE + sizeof(sl_rec_health) \
                      + SL_SECTION_HEADER_SIZE + sizeof(sl_rec_abort))

/* Largest frame for this world: every record of every table, at most the body bound. */
static size_t max_frame_size(int world_size)
{
    size_t all = SL_SECTION_HEADER_SIZE + sizeof(sl_rec_rank_info)
                 + SL_SECTION_HEADER_SIZE + (size_t)world_size * sizeof(sl_rec_p2p)
                 + SL_SECTION_HEADER_SIZE + (size_t)SL_OP_COUNT * sizeof(sl_rec_op)
                 + SL_SECTION_HEADER_SIZE
                 + (size_t)SL_OP_COUNT * SL_HIST_BUCKETS * sizeof(sl_rec_hist)
                 + SL_SECTION_HEADER_SIZE + sl_keytab_entries(&sl_coll) * sizeof(sl_rec_coll)
                 + SL_SECTION_HEADER_SIZE
                 + (size_t)world_size * SL_RMA_COUNT * sizeof(sl_rec_rma)
                 + SL_SECTION_HEADER_SIZE + sl_keytab_entries(&sl_io) * sizeof(sl_rec_io)
                 + SL_SECTION_HEADER_SIZE + (size_t)sl_family_capacity() * sizeof(sl_rec_comm)
                 + SL_SECTION_HEADER_SIZE
                 + sl_keytab_entries(&sl_comm_p2p) * sizeof(sl_rec_comm_p2p)
                 + SL_SECTION_HEADER_SIZE + sl_keytab_entries(&sl_sites) * sizeof(sl_rec_callsite)
                 + SL_SECTION_HEADER_SIZE + (size_t)sl_keytab_entries(&sl_site_paths)
                   * SL_BOUND_max_site_depth * sizeof(sl_rec_callsite_frame)
                 + (size_t)world_size * sizeof(sl_rec_monitored) + SL_TAIL_SIZE;
    return sizeof(sl_frame_header) + (all < SL_BOUND_max_body_bytes ? all
                                                                      : SL_BOUND_max_body_bytes);
}

/* Allocates the last-sent snapshot and the scratch frame for this world size. */
int sl_frame_builder_init(sl_frame_builder *b, const sl_identity *id, const char *token)
{
    memset(b, 0, sizeof *b);
    b->id = id;
    memcpy(b->token, token, sizeof b->token);
    b->scratch_size = max_frame_size(sl_core.world_size);
    b->last_peer = calloc((size_t)sl_core.world_size, sizeof *b->last_peer);
    b->last_hist = calloc(SL_OP_COUNT, sizeof *b->last_hist);
    b->last_rma = calloc((size_t)sl_core.world_size * SL_RMA_COUNT + 1, sizeof *b->last_rma);
    b->last_coll = calloc(sl_keytab_entries(&sl_coll) * SL_COLL_NVALS + 1, sizeof *b->last_coll);
    b->last_io = calloc(sl_keytab_entries(&sl_io) * SL_IO_NVALS + 1, sizeof *b->last_io);
    b->last_comm_p2p = calloc(sl_keytab_entries(&sl_comm_p2p) * SL_CP2P_NVALS + 1,
                              sizeof *b->last_comm_p2p);
    b->comm_seen = calloc((size_t)sl_family_capacity() + 1, sizeof *b->comm_seen);
    b->last_site = calloc(sl_keytab_entries(&sl_sites) * SL_SITE_NVALS + 1, sizeof *b->last_site);
    b->site_now = calloc(sl_keytab_entries(&sl_sites) * SL_SITE_NVALS + 1, sizeof *b->site_now);
    if (sl_monitored_active()) {
        b->last_monitored = calloc((size_t)sl_core.world_size, sizeof *b->last_monitored);
        b->now_monitored = calloc((size_t)sl_core.world_size, sizeof *b->now_monitored);
    }
    b->scratch = malloc(b->scratch_size);
    if ((sl_monitored_active() && (b->last_monitored == NULL || b->now_monitored == NULL))
        || b->last_peer == NULL || b->last_hist == NULL || b->last_rma == NULL
        || b->last_coll == NULL || b->last_io == NULL || b->last_comm_p2p == NULL
        || b->comm_seen == NULL || b->last_site == NULL || b->site_now == NULL
        || b->scratch == NULL) {
        sl_frame_builder_fini(b);
        return -1;
    }
    b->interval_start_ns = sl_real_ns();
    return 0;
}

/* Frees the builder's buffers (safe on a half-initialised builder). */
void sl_frame_builder_fini(sl_frame_builder *b)
{
    free(b->last_peer);
    free(b->last_hist);
    free(b->last_rma);
    free(b->last_coll);
    free(b->last_io);
    free(b->last_comm_p2p);
    free(b->comm_seen);
    free(b->last_site);
    free(b->site_now);
    free(b->last_monitored);
    free(b->now_monitored);
    free(b->scratch);
    b->last_monitored = NULL;
    b->now_monitored = NULL;
    b->last_peer = NULL;
    b->last_hist = NULL;
    b->last_rma = NULL;
    b->last_coll = NULL;
    b->last_io = NULL;
    b->last_comm_p2p = NULL;
    b->comm_seen = NULL;
    b->last_site = NULL;
    b->site_now = NULL;
    b->scratch = NULL;
}

/* Writes a section header at out: table id, record size, count. */
static void put_section(unsigned char *out, uint16_t table, uint16_t rec_size, uint32_t count)
{
    memcpy(out, &table, 2);
    memcpy(out + 2, &rec_size, 2);
    memcpy(out + 4, &count, 4);
}

/* Writes the rank_info section (one record: id's command, user, run label, launch id,
 * executable's build-id, network devices and executable's path) at out + pos; returns the
 * new end. */
static size_t put_rank_info(const sl_identity *id, unsigned char *out, size_t pos)
{
    sl_rec_rank_info info;
    memcpy(info.command, id->command, sizeof info.command);
    memcpy(info.user, id->user, sizeof info.user);
    memcpy(info.run_label, id->run_label, sizeof info.run_label);
    memcpy(info.exe_build_id, id->exe_build_id, sizeof info.exe_build_id);
    memcpy(info.net_devices, id->net_devices, sizeof info.net_devices);
    memcpy(info.exe_path, id->exe_path, sizeof info.exe_path);
    info.launch_id = id->launch_id;
    put_section(out + pos, SL_TABLE_rank_info, sizeof info, 1);
    memcpy(out + pos + SL_SECTION_HEADER_SIZE, &info, sizeof info);
    return pos + SL_SECTION_HEADER_SIZE + sizeof info;
}

/* A section being appended to the scratch frame: where it starts, where the next record
 * goes, how many records it has. */
typedef struct sl_section {
    size_t start, pos;
    uint32_t count;
} sl_section;

/* Opens a section at pos (its header is written when it is closed). */
static sl_section section_open(size_t pos)
{
    return (sl_section){ .start = pos, .pos = pos + SL_SECTION_HEADER_SIZE, .count = 0 };
}

/* Appends one record to the section if the frame has room for it before its tail
 * (SL_TAIL_SIZE); else returns 0 and marks the frame full: the caller then keeps the
 * record's deltas for a later frame (its last-sent values stay as they are). */
static int section_add(sl_frame_builder *b, sl_section *sec, const void *rec, size_t size)
{
    if (sec->pos + size > b->scratch_size - SL_TAIL_SIZE) {
        b->full = 1;
        return 0;
    }
    memcpy(b->scratch + sec->pos, rec, size);
    sec->pos += size;
    sec->count++;
    return 1;
}

/* Writes the section header and returns the new end; an empty section is left out. */
static size_t section_close(sl_frame_builder *b, const sl_section *sec, uint16_t table,
                            uint16_t rec_size)
{
    if (sec->count == 0)
        return sec->start;
    put_section(b->scratch + sec->start, table, rec_size, sec->count);
    return sec->pos;
}

/* Appends the p2p records with non-zero deltas at pos; returns the new end. */
static size_t put_p2p(sl_frame_builder *b, size_t pos)
{
    sl_section sec = section_open(pos);
    for (int i = 0; i < sl_core.world_size; i++) {
        sl_peer_counters now, *last = &b->last_peer[i];
        sl_core_load_peer(i, &now);
        /* Message counts stay below the wire's bound; more (never seen: 300 M messages
         * a second to one peer for the longest interval) waits for the next frame. */
        const uint64_t most = (1ull << SL_BOUND_max_msgs_bits) - 1;
        uint64_t sent = now.msgs_sent - last->msgs_sent, recv = now.msgs_recv - last->msgs_recv;
        sl_rec_p2p r = {
            .peer = (uint32_t)i,
            .bytes_sent = now.bytes_sent - last->bytes_sent,
            .msgs_sent = sent < most ? sent : most,
            .bytes_recv = now.bytes_recv - last->bytes_recv,
            .msgs_recv = recv < most ? recv : most,
        };
        if ((r.bytes_sent | r.msgs_sent | r.bytes_recv | r.msgs_recv) != 0
            && section_add(b, &sec, &r, sizeof r)) {
            last->bytes_sent = now.bytes_sent;
            last->bytes_recv = now.bytes_recv;
            last->msgs_sent += r.msgs_sent;
            last->msgs_recv += r.msgs_recv;
        }
    }
    return section_close(b, &sec, SL_TABLE_p2p, sizeof(sl_rec_p2p));
}

/* Appends the op records with non-zero deltas at pos; returns the new end. */
static size_t put_ops(sl_frame_builder *b, size_t pos, double ratio)
{
    sl_section sec = section_open(pos);
    for (int i = 0; i < SL_OP_COUNT; i++) {
        sl_op_counters now, *last = &b->last_op[i];
        sl_core_load_op(i, &now);
        sl_rec_op r = {
            .op_id = (uint32_t)i,
            .calls = now.calls - last->calls,
            .bytes = now.bytes - last->bytes,
        };
        uint64_t ticks = now.ticks - last->ticks;
        if ((r.calls | r.bytes | ticks) == 0)
            continue;
        r.time_ns = sl_ticks_to_ns(ticks, ratio);
        if (section_add(b, &sec, &r, sizeof r))
            *last = now;
    }
    return section_close(b, &sec, SL_TABLE_op, sizeof(sl_rec_op));
}

/* Deltas of n cumulative counters against last[] into d[]; the current values into now[].
 * Returns non-zero if any delta is. */
static uint64_t deltas(const uint64_t *counters, const uint64_t *last, uint64_t *now,
                       uint64_t *d, unsigned n)
{
    uint64_t any = 0;
    for (unsigned i = 0; i < n; i++) {
        now[i] = __atomic_load_n(&counters[i], __ATOMIC_RELAXED);
        any |= d[i] = now[i] - last[i];
    }
    return any;
}

/* True if op has been called (as of the last frame, or now). */
static int op_called(const sl_frame_builder *b, int op)
{
    if (b->last_op[op].calls != 0)
        return 1;
    sl_op_counters now;
    sl_core_load_op(op, &now);
    return now.calls != 0;
}

/* Appends the histogram records with non-zero counts. Rows of ops never
 * called are skipped: a message is counted in its op's row only after (or,
 * for a receive completed on another thread, just before) the op's call is,
 * and a skipped delta stays in the cumulative counter for the next frame. */
static size_t put_hist(sl_frame_builder *b, size_t pos)
{
    sl_section sec = section_open(pos);
    for (int op = 0; op < SL_OP_COUNT; op++) {
        if (!op_called(b, op))
            continue;
        for (int k = 0; k < SL_HIST_BUCKETS; k++) {
            uint64_t now = sl_core_load_hist(op, k);
            uint64_t d = now - b->last_hist[op][k];
            sl_rec_hist r = { .op_id = (uint32_t)op, .bucket = (uint32_t)k, .count = d };
            if (d != 0 && section_add(b, &sec, &r, sizeof r))
                b->last_hist[op][k] = now;
        }
    }
    return section_close(b, &sec, SL_TABLE_hist, sizeof(sl_rec_hist));
}

/* Appends the coll records (communicator, op, root) with non-zero deltas. */
static size_t put_coll(sl_frame_builder *b, size_t pos, double ratio)
{
    if (sl_coll.entries == NULL)
        return pos;
    sl_section sec = section_open(pos);
    unsigned n = sl_keytab_count(&sl_coll);
    size_t total = sl_keytab_entries(&sl_coll);
    for (unsigned i = sl_keytab_next(&sl_coll, ~0u, n); i < total;
         i = sl_keytab_next(&sl_coll, i, n)) {
        const sl_coll_key *k = sl_keytab_key(&sl_coll, i);
        uint64_t now[SL_COLL_NVALS], d[SL_COLL_NVALS], *last = &b->last_coll[i * SL_COLL_NVALS];
        if (!deltas(sl_keytab_vals(&sl_coll, i), last, now, d, SL_COLL_NVALS))
            continue;
        sl_rec_coll r = {
            .op_id = k->op, .comm_id = k->comm_id, .comm_size = k->size, .root = k->root,
            .calls = d[SL_COLL_CALLS], .bytes = d[SL_COLL_BYTES],
            .time_ns = sl_ticks_to_ns(d[SL_COLL_TIME], ratio),
        };
        if (section_add(b, &sec, &r, sizeof r))
            memcpy(last, now, sizeof now);
    }
    return section_close(b, &sec, SL_TABLE_coll, sizeof(sl_rec_coll));
}

/* Appends the RMA records (target, op) with non-zero deltas. */
static size_t put_rma(sl_frame_builder *b, size_t pos)
{
    sl_section sec = section_open(pos);
    for (int t = 0; sl_core.rma != NULL && t < sl_core.world_size; t++) {
        for (int s = 0; s < SL_RMA_COUNT; s++) {
            size_t i = (size_t)t * SL_RMA_COUNT + (size_t)s;
            uint64_t now[2], d[2];
            if (!deltas(&sl_core.rma[i].calls, &b->last_rma[i].calls, now, d, 2))
                continue;
            sl_rec_rma r = { .target = (uint32_t)t, .op_id = (uint32_t)sl_rma_ops[s],
                             .calls = d[0], .bytes = d[1] };
            if (section_add(b, &sec, &r, sizeof r))
                b->last_rma[i] = (sl_rma_counters){ .calls = now[0], .bytes = now[1] };
        }
    }
    return section_close(b, &sec, SL_TABLE_rma, sizeof(sl_rec_rma));
}

/* Appends the I/O records (layer, file) with non-zero deltas. */
static size_t put_io(sl_frame_builder *b, size_t pos, double ratio)
{
    if (sl_io.entries == NULL)
        return pos;
    sl_section sec = section_open(pos);
    unsigned n = sl_keytab_count(&sl_io);
    size_t total = sl_keytab_entries(&sl_io);
    for (unsigned i = sl_keytab_next(&sl_io, ~0u, n); i < total; i = sl_keytab_next(&sl_io, i, n)) {
        const sl_io_key *k = sl_keytab_key(&sl_io, i);
        uint64_t v[SL_IO_NVALS], now[SL_IO_NVALS], d[SL_IO_NVALS];
        uint64_t *last = &b->last_io[i * SL_IO_NVALS];
        sl_io_load(i, v);
        if (!deltas(v, last, now, d, SL_IO_NVALS))
            continue;
        sl_rec_io r = {
            .layer = k->layer, .phase = k->phase,
            .opens = d[SL_IO_OPENS], .reads = d[SL_IO_READS],
            .writes = d[SL_IO_WRITES], .bytes_read = d[SL_IO_BYTES_READ],
            .bytes_written = d[SL_IO_BYTES_WRITTEN],
            .read_time_ns = sl_ticks_to_ns(d[SL_IO_READ_TIME], ratio),
            .write_time_ns = sl_ticks_to_ns(d[SL_IO_WRITE_TIME], ratio),
            .meta_time_ns = sl_ticks_to_ns(d[SL_IO_META_TIME], ratio),
        };
        memcpy(r.path, k->path, sizeof r.path);
        memcpy(r.mount, k->mount, sizeof r.mount);
        memcpy(r.fstype, k->fstype, sizeof r.fstype);
        if (section_add(b, &sec, &r, sizeof r))
            memcpy(last, now, sizeof now);
    }
    return section_close(b, &sec, SL_TABLE_io, sizeof(sl_rec_io));
}

/* Appends the descriptions of the communicators made or renamed since the last frame,
 * as many as the frame has room for (the others wait for the next frame). */
static size_t put_comm(sl_frame_builder *b, size_t pos)
{
    size_t room = b->scratch_size - SL_TAIL_SIZE;
    if (pos + SL_SECTION_HEADER_SIZE + sizeof(sl_rec_comm) > room)
        return pos;
    unsigned max = (unsigned)((room - pos - SL_SECTION_HEADER_SIZE) / sizeof(sl_rec_comm));
    unsigned n = sl_family_changed((sl_rec_comm *)(void *)(b->scratch + pos + SL_SECTION_HEADER_SIZE),
                                   max, b->comm_seen);
    if (n == 0)
        return pos;
    put_section(b->scratch + pos, SL_TABLE_comm, sizeof(sl_rec_comm), n);
    return pos + SL_SECTION_HEADER_SIZE + (size_t)n * sizeof(sl_rec_comm);
}

/* Appends the comm_p2p records (communicator, op, peer) with non-zero deltas. */
static size_t put_comm_p2p(sl_frame_builder *b, size_t pos, double ratio)
{
    if (sl_comm_p2p.entries == NULL)
        return pos;
    sl_section sec = section_open(pos);
    unsigned n = sl_keytab_count(&sl_comm_p2p);
    size_t total = sl_keytab_entries(&sl_comm_p2p);
    for (unsigned i = sl_keytab_next(&sl_comm_p2p, ~0u, n); i < total;
         i = sl_keytab_next(&sl_comm_p2p, i, n)) {
        const sl_comm_p2p_key *k = sl_keytab_key(&sl_comm_p2p, i);
        uint64_t cur[SL_CP2P_NVALS], now[SL_CP2P_NVALS], d[SL_CP2P_NVALS];
        uint64_t *last = &b->last_comm_p2p[i * SL_CP2P_NVALS];
        sl_comm_p2p_load(i, cur);
        if (!deltas(cur, last, now, d, SL_CP2P_NVALS))
            continue;
        sl_rec_comm_p2p r = {
            .comm_id = k->comm_id, .op_id = k->op, .peer = k->peer, .received = k->received,
            .msgs = d[SL_CP2P_MSGS], .bytes = d[SL_CP2P_BYTES],
            .time_ns = sl_ticks_to_ns(d[SL_CP2P_TIME], ratio),
        };
        if (section_add(b, &sec, &r, sizeof r))
            memcpy(last, now, sizeof now);
    }
    return section_close(b, &sec, SL_TABLE_comm_p2p, sizeof(sl_rec_comm_p2p));
}

/* Appends the callsite records (site, layer, op, communicator, bucket) with non-zero
 * deltas. */
static size_t put_callsite(sl_frame_builder *b, size_t pos, double ratio)
{
    if (sl_sites.entries == NULL)
        return pos;
    sl_section sec = section_open(pos);
    unsigned n = sl_keytab_count(&sl_sites);
    size_t total = sl_keytab_entries(&sl_sites);
    sl_site_load_all(b->site_now, n);
    for (unsigned i = sl_keytab_next(&sl_sites, ~0u, n); i < total;
         i = sl_keytab_next(&sl_sites, i, n)) {
        const sl_site_key *k = sl_keytab_key(&sl_sites, i);
        uint64_t d[SL_SITE_NVALS];
        uint64_t *last = &b->last_site[i * SL_SITE_NVALS];
        const uint64_t *now = &b->site_now[i * SL_SITE_NVALS];
        for (int f = 0; f < SL_SITE_NVALS; f++)
            d[f] = now[f] - last[f];
        if ((d[SL_SITE_CALLS] | d[SL_SITE_BYTES] | d[SL_SITE_TICKS]) == 0)
            continue;
        sl_rec_callsite r = {
            .site_id = k->site_id, .layer = k->layer, .op_id = k->op, .comm_id = k->comm_id,
            .bucket = k->bucket, .calls = d[SL_SITE_CALLS], .bytes = d[SL_SITE_BYTES],
            .time_ns = sl_ticks_to_ns(d[SL_SITE_TICKS], ratio),
        };
        if (section_add(b, &sec, &r, sizeof r))
            memcpy(last, now, SL_SITE_NVALS * sizeof *now);
    }
    return section_close(b, &sec, SL_TABLE_callsite, sizeof(sl_rec_callsite));
}

/* Appends the frames of the call-site paths new since the last frame (a path's frames
 * all in one frame; those without room wait for the next). */
static size_t put_callsite_frames(sl_frame_builder *b, size_t pos)
{
    if (sl_site_paths.entries == NULL)
        return pos;
    sl_section sec = section_open(pos);
    unsigned n = sl_keytab_count(&sl_site_paths);
    while (b->sites_described < n) {
        sl_rec_callsite_frame recs[SL_BOUND_max_site_depth];
        unsigned depth = sl_site_describe(b->sites_described, recs);
        if (sec.pos + depth * sizeof recs[0] > b->scratch_size - SL_TAIL_SIZE) {
            b->full = 1;
            break;
        }
        for (unsigned f = 0; f < depth; f++)
            section_add(b, &sec, &recs[f], sizeof recs[f]);
        sl_snapshot_sites(recs, depth); /* for `stacklens run` to resolve on this node */
        b->sites_described++;
    }
    return section_close(b, &sec, SL_TABLE_callsite_frame, sizeof(sl_rec_callsite_frame));
}

/* Reads the monitored counters for this frame (monitored.h), before the peer table: a
 * message is counted there before the MPI call that sends it (core.h, sl_count_send)
 * and monitored inside it, so every message monitored by now is in the peer table read
 * next (a frame never carries a message's monitored bytes without its point-to-point
 * bytes; one posted while the frame is read may have its point-to-point bytes in this
 * frame and its monitored bytes in the next). */
static void read_monitored(sl_frame_builder *b)
{
    if (b->now_monitored == NULL)
        return;
    for (int i = 0; i < sl_core.world_size; i++)
        sl_monitored_load(i, &b->now_monitored[i].bytes, &b->now_monitored[i].msgs);
    __atomic_thread_fence(__ATOMIC_ACQUIRE); /* pairs with sl_count_send's release */
}

/*
 * Appends the monitored section when the MPI monitors its traffic (monitored.h): the
 * peers whose counters moved by the reading of read_monitored, and the section even
 * without records ("monitored, nothing sent"; its header has room in the tail). Counts
 * over the wire's bounds (never seen) wait for the next frame.
 */
static size_t put_monitored(sl_frame_builder *b, size_t pos)
{
    if (b->last_monitored == NULL)
        return pos; /* not monitored: no section, never a 0 */
    sl_section sec = section_open(pos);
    const uint64_t most_msgs = (1ull << SL_BOUND_max_msgs_bits) - 1;
    const uint64_t most_bytes = (1ull << SL_BOUND_max_counter_bits) - 1;
    for (int i = 0; i < sl_core.world_size; i++) {
        sl_monitored_sent *last = &b->last_monitored[i];
        uint64_t db = b->now_monitored[i].bytes - last->bytes;
        uint64_t dm = b->now_monitored[i].msgs - last->msgs;
        sl_rec_monitored r = { .peer = (uint32_t)i, .bytes = db < most_bytes ? db : most_bytes,
                          .msgs = dm < most_msgs ? dm : most_msgs };
        if ((r.bytes | r.msgs) != 0 && section_add(b, &sec, &r, sizeof r)) {
            last->bytes += r.bytes;
            last->msgs += r.msgs;
        }
    }
    put_section(b->scratch + sec.start, SL_TABLE_monitored, sizeof(sl_rec_monitored), sec.count);
    return sec.pos;
}

/* Appends the health record if anything was dropped or spooled (b->health_offset
 * says where it is, 0 if absent). */
static size_t put_health(sl_frame_builder *b, size_t pos)
{
    const uint64_t *counters[3] = { &sl_core.keys_dropped, b->frames_dropped, b->frames_spooled };
    uint64_t now[3] = { 0 }, d[3] = { 0 };
    for (int i = 0; i < 3; i++)
        if (counters[i] != NULL)
            deltas(counters[i], &b->last_health[i], &now[i], &d[i], 1);
    b->health_offset = 0;
    if ((d[0] | d[1] | d[2]) == 0)
        return pos;
    memcpy(b->last_health, now, sizeof now);
    sl_rec_health r = { .keys_dropped = d[0], .frames_dropped = d[1], .frames_spooled = d[2] };
    put_section(b->scratch + pos, SL_TABLE_health, sizeof r, 1);
    memcpy(b->scratch + pos + SL_SECTION_HEADER_SIZE, &r, sizeof r);
    b->health_offset = pos + SL_SECTION_HEADER_SIZE;
    return pos + SL_SECTION_HEADER_SIZE + sizeof r;
}

/* Appends the abort record (MPI_Abort's error code). */
static size_t put_abort(sl_frame_builder *b, size_t pos, int32_t errorcode)
{
    sl_rec_abort r = { .errorcode = (uint32_t)errorcode };
    put_section(b->scratch + pos, SL_TABLE_abort, sizeof r, 1);
    memcpy(b->scratch + pos + SL_SECTION_HEADER_SIZE, &r, sizeof r);
    return pos + SL_SECTION_HEADER_SIZE + sizeof r;
}

/* Encodes the deltas since the previous frame into a new malloc'd frame. */
unsigned char *sl_frame_build(sl_frame_builder *b, unsigned frame_type, int32_t errorcode,
                              size_t *len, uint64_t *seq, int *more)
{
    size_t pos = sizeof(sl_frame_header);
    double ratio = sl_ticks_ratio(); /* ns per tick, for this frame's time deltas */
    *seq = b->next_seq++;
    if (*seq == 0) {
        pos = put_rank_info(b->id, b->scratch, pos);
    }
    b->full = 0;
    read_monitored(b); /* before the peer table: see there */
    pos = put_p2p(b, pos);
    pos = put_ops(b, pos, ratio);
    pos = put_hist(b, pos);
    pos = put_coll(b, pos, ratio);
    pos = put_rma(b, pos);
    pos = put_io(b, pos, ratio);
    pos = put_comm(b, pos);
    pos = put_comm_p2p(b, pos, ratio);
    pos = put_callsite(b, pos, ratio);
    pos = put_callsite_frames(b, pos);
    pos = put_monitored(b, pos);
    pos += sl_ibport_put(b->scratch + pos); /* reads sysfs: sender thread only */
    pos = put_health(b, pos);
    *more = b->full;
    if (b->full) /* deltas are left: this cannot be the last frame */
        frame_type = SL_FRAME_interval;
    if (frame_type == SL_FRAME_aborted)
        pos = put_abort(b, pos, errorcode);

    /* Never let an interval end before it starts, even if the wall clock steps back. */
    uint64_t end_ns = sl_real_ns();
    if (end_ns < b->interval_start_ns)
        end_ns = b->interval_start_ns;
    sl_frame_header h = {
        .magic = SL_FRAME_MAGIC,
        .version = SL_WIRE_VERSION,
        .frame_type = (uint16_t)frame_type,
        .body_len = (uint32_t)(pos - sizeof h),
        .world_rank = (uint32_t)sl_core.world_rank,
        .world_size = (uint32_t)sl_core.world_size,
        .pid = b->id->pid,
        .seq = *seq,
        .interval_start_ns = b->interval_start_ns,
        .interval_end_ns = end_ns,
        .run_id = b->id->run_id,
        .proc_start_ns = b->id->proc_start_ns,
    };
    memcpy(h.job_id, b->id->job_id, sizeof h.job_id);
    memcpy(h.host, b->id->host, sizeof h.host);
    memcpy(h.token, b->token, sizeof h.token);
    memcpy(b->scratch, &h, sizeof h);
    b->interval_start_ns = end_ns;

    unsigned char *frame = malloc(pos);
    if (frame != NULL)
        memcpy(frame, b->scratch, pos);
    *len = pos;
    return frame;
}

/* Finds the health record of a built frame by walking its sections, and takes its deltas
 * back out of the last-sent values: the next frame carries them again. */
void sl_frame_recredit(sl_frame_builder *b, const unsigned char *frame, size_t len)
{
    size_t pos = sizeof(sl_frame_header);
    while (pos + SL_SECTION_HEADER_SIZE <= len) {
        uint16_t table, rec_size;
        uint32_t count;
        memcpy(&table, frame + pos, 2);
        memcpy(&rec_size, frame + pos + 2, 2);
        memcpy(&count, frame + pos + 4, 4);
        pos += SL_SECTION_HEADER_SIZE;
        if (table == SL_TABLE_health && count == 1 && pos + sizeof(sl_rec_health) <= len) {
            sl_rec_health h;
            memcpy(&h, frame + pos, sizeof h);
            b->last_health[0] -= h.keys_dropped;
            b->last_health[1] -= h.frames_dropped;
            b->last_health[2] -= h.frames_spooled;
            return;
        }
        pos += (size_t)rec_size * count;
    }
}

/* A section in a buffer of cap bytes being peeked into (sl_frame_peek). */
typedef struct sl_peek {
    unsigned char *out;
    size_t cap, start, pos;
    uint32_t count;
} sl_peek;

/* Appends one record if it fits; 0 when the buffer is full. */
static int peek_add(sl_peek *p, const void *rec, size_t size)
{
    if (p->pos + size > p->cap)
        return 0;
    memcpy(p->out + p->pos, rec, size);
    p->pos += size;
    p->count++;
    return 1;
}

/* Writes the section's header and returns its end (an empty one is left out). */
static size_t peek_close(const sl_peek *p, uint16_t table, uint16_t rec_size)
{
    if (p->count == 0)
        return p->start;
    put_section(p->out + p->start, table, rec_size, p->count);
    return p->pos;
}

/* Op record i of the deltas since b's last frame in *r; 1 if any is not zero. */
static int peek_op(const sl_frame_builder *b, int i, sl_rec_op *r, double ratio)
{
    sl_op_counters now;
    const sl_op_counters *last = &b->last_op[i];
    sl_core_load_op(i, &now);
    uint64_t ticks = now.ticks - last->ticks;
    *r = (sl_rec_op){ .op_id = (uint32_t)i, .calls = now.calls - last->calls,
                      .bytes = now.bytes - last->bytes, .time_ns = sl_ticks_to_ns(ticks, ratio) };
    return (r->calls | r->bytes | ticks) != 0;
}

/* P2p record of peer i of the deltas since b's last frame in *r; 1 if any is not zero. */
static int peek_p2p(const sl_frame_builder *b, int i, sl_rec_p2p *r)
{
    sl_peer_counters now;
    const sl_peer_counters *last = &b->last_peer[i];
    sl_core_load_peer(i, &now);
    const uint64_t most = (1ull << SL_BOUND_max_msgs_bits) - 1;
    uint64_t sent = now.msgs_sent - last->msgs_sent, recv = now.msgs_recv - last->msgs_recv;
    *r = (sl_rec_p2p){ .peer = (uint32_t)i, .bytes_sent = now.bytes_sent - last->bytes_sent,
                       .msgs_sent = sent < most ? sent : most,
                       .bytes_recv = now.bytes_recv - last->bytes_recv,
                       .msgs_recv = recv < most ? recv : most };
    return (r->bytes_sent | r->msgs_sent | r->bytes_recv | r->msgs_recv) != 0;
}

/* The frame the rank's next one would start as, ended by a signal now: see frame.h. */
size_t sl_frame_peek(const sl_frame_builder *b, unsigned char *out, size_t cap)
{
    size_t pos = sizeof(sl_frame_header);
    if (cap < pos + SL_SECTION_HEADER_SIZE + sizeof(sl_rec_rank_info))
        return 0;
    double ratio = sl_ticks_ratio();
    if (b->next_seq == 0) {
        pos = put_rank_info(b->id, out, pos);
    }
    sl_peek ops = { out, cap, pos, pos + SL_SECTION_HEADER_SIZE, 0 };
    sl_rec_op op;
    for (int i = 0; i < SL_OP_COUNT; i++)
        if (peek_op(b, i, &op, ratio) && !peek_add(&ops, &op, sizeof op))
            break;
    pos = peek_close(&ops, SL_TABLE_op, sizeof op);
    sl_peek peers = { out, cap, pos, pos + SL_SECTION_HEADER_SIZE, 0 };
    sl_rec_p2p p2p;
    for (int i = 0; i < sl_core.world_size; i++)
        if (peek_p2p(b, i, &p2p) && !peek_add(&peers, &p2p, sizeof p2p))
            break;
    pos = peek_close(&peers, SL_TABLE_p2p, sizeof p2p);
    uint64_t end_ns = sl_real_ns();
    if (end_ns < b->interval_start_ns)
        end_ns = b->interval_start_ns;
    sl_frame_header h = {
        .magic = SL_FRAME_MAGIC,
        .version = SL_WIRE_VERSION,
        .frame_type = SL_FRAME_killed,
        .body_len = (uint32_t)(pos - sizeof h),
        .world_rank = (uint32_t)sl_core.world_rank,
        .world_size = (uint32_t)sl_core.world_size,
        .pid = b->id->pid,
        .seq = b->next_seq,
        .interval_start_ns = b->interval_start_ns,
        .interval_end_ns = end_ns,
        .run_id = b->id->run_id,
        .proc_start_ns = b->id->proc_start_ns,
    };
    memcpy(h.job_id, b->id->job_id, sizeof h.job_id);
    memcpy(h.host, b->id->host, sizeof h.host);
    memcpy(h.token, b->token, sizeof h.token);
    memcpy(out, &h, sizeof h);
    return pos;
}
