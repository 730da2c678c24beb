/*
 * frame.c — builds delta frames from the cumulative core tables (see
 * frame.h). Layout: sl_frame_header, then sections of
 * {u16 table id, u16 record size, u32 count, records}; empty sections are
 * left out.
 */
#include "frame.h"

#include <stdlib.h>
#include <string.h>

/* Largest frame for this world: header, rank_info, a p2p record per peer, an op record per op. */
static size_t max_frame_size(int world_size)
{
    return sizeof(sl_frame_header)
           + SL_SECTION_HEADER_SIZE + sizeof(sl_rec_rank_info)
           + SL_SECTION_HEADER_SIZE + (size_t)world_size * sizeof(sl_rec_p2p)
           + SL_SECTION_HEADER_SIZE + (size_t)SL_OP_COUNT * sizeof(sl_rec_op);
}

/* Allocates the last-sent snapshot and the scratch frame for this world size. */
int sl_frame_builder_init(sl_frame_builder *b, const sl_identity *id, const char *token)
{
    memset(b, 0, sizeof *b);
    b->id = id;
    memcpy(b->token, token, sizeof b->token);
    b->scratch_size = max_frame_size(sl_core.world_size);
    b->last_peer = calloc((size_t)sl_core.world_size, sizeof *b->last_peer);
    b->scratch = malloc(b->scratch_size);
    if (b->last_peer == NULL || b->scratch == NULL) {
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
    free(b->scratch);
    b->last_peer = NULL;
    b->scratch = NULL;
}

/* Writes a section header at out: table id, record size, count. */
static void put_section(unsigned char *out, uint16_t table, uint16_t rec_size, uint32_t count)
{
    memcpy(out, &table, 2);
    memcpy(out + 2, &rec_size, 2);
    memcpy(out + 4, &count, 4);
}

/* Appends the p2p records with non-zero deltas at pos; returns the new end. */
static size_t put_p2p(sl_frame_builder *b, size_t pos)
{
    size_t start = pos;
    uint32_t count = 0;
    pos += SL_SECTION_HEADER_SIZE;
    for (int i = 0; i < sl_core.world_size; i++) {
        sl_peer_counters now, *last = &b->last_peer[i];
        sl_core_load_peer(i, &now);
        sl_rec_p2p r = {
            .peer = (uint32_t)i,
            .bytes_sent = now.bytes_sent - last->bytes_sent,
            .msgs_sent = now.msgs_sent - last->msgs_sent,
            .bytes_recv = now.bytes_recv - last->bytes_recv,
            .msgs_recv = now.msgs_recv - last->msgs_recv,
        };
        if ((r.bytes_sent | r.msgs_sent | r.bytes_recv | r.msgs_recv) == 0)
            continue;
        *last = now;
        memcpy(b->scratch + pos, &r, sizeof r);
        pos += sizeof r;
        count++;
    }
    if (count == 0)
        return start;
    put_section(b->scratch + start, SL_TABLE_p2p, sizeof(sl_rec_p2p), count);
    return pos;
}

/* Appends the op records with non-zero deltas at pos; returns the new end. */
static size_t put_ops(sl_frame_builder *b, size_t pos)
{
    size_t start = pos;
    uint32_t count = 0;
    pos += SL_SECTION_HEADER_SIZE;
    for (int i = 0; i < SL_OP_COUNT; i++) {
        sl_op_counters now, *last = &b->last_op[i];
        sl_core_load_op(i, &now);
        sl_rec_op r = {
            .op_id = (uint32_t)i,
            .calls = now.calls - last->calls,
            .bytes = now.bytes - last->bytes,
            .time_ns = now.time_ns - last->time_ns,
        };
        if ((r.calls | r.bytes | r.time_ns) == 0)
            continue;
        *last = now;
        memcpy(b->scratch + pos, &r, sizeof r);
        pos += sizeof r;
        count++;
    }
    if (count == 0)
        return start;
    put_section(b->scratch + start, SL_TABLE_op, sizeof(sl_rec_op), count);
    return pos;
}

/* Encodes the deltas since the previous frame into a new malloc'd frame. */
unsigned char *sl_frame_build(sl_frame_builder *b, unsigned frame_type, size_t *len,
                              uint64_t *seq)
{
    size_t pos = sizeof(sl_frame_header);
    *seq = b->next_seq++;
    if (*seq == 0) {
        sl_rec_rank_info info;
        memcpy(info.command, b->id->command, sizeof info.command);
        put_section(b->scratch + pos, SL_TABLE_rank_info, sizeof info, 1);
        memcpy(b->scratch + pos + SL_SECTION_HEADER_SIZE, &info, sizeof info);
        pos += SL_SECTION_HEADER_SIZE + sizeof info;
    }
    pos = put_p2p(b, pos);
    pos = put_ops(b, pos);

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
