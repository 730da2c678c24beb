/*
 * slcodec.c — the collector's compiled frame path (see slcodec.h).
 *
 * Scanning validates frames in place, without copying bodies: the header
 * rules, the section structure, then the value ranges, in the order (and with
 * the statuses) of stacklens/wire.py. Encoding turns the array-layout tables
 * of a batch straight into PostgreSQL binary COPY rows. Record layouts come
 * from stacklens_wire.def through stacklens_wire.h, like the hook library's.
 */
#include "slcodec.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "stacklens_text.h"
#include "stacklens_wire.h"

#define SL_INT4_MAX 0x7FFFFFFFull
/* The bounds come from the .def (SL_BOUND_*). Messages to one peer in one interval stay
 * below 2^max_msgs_bits (over 300 M/s for the longest, 1-hour interval): it bounds how
 * far the encoder splits a count (512 int4 pieces). */

_Static_assert(sizeof(sl_frame_info) % 8 == 0, "sl_frame_info must have no tail padding");

/* Record size of each table id, 0 for ids the .def does not define. */
static const uint16_t record_size[SL_MAX_TABLE_ID + 1] = {
#undef  SL_TABLE
#define SL_TABLE(id, name, doc) [id] = sizeof(sl_rec_##name),
#include "stacklens_wire.def"
#undef  SL_TABLE
#define SL_TABLE SL_NOTHING3
};

static const char *const table_name[SL_MAX_TABLE_ID + 1] = {
#undef  SL_TABLE
#define SL_TABLE(id, name, doc) [id] = #name,
#include "stacklens_wire.def"
#undef  SL_TABLE
#define SL_TABLE SL_NOTHING3
};

/* Every record field, flagged when it is a u64: those are counters, which must stay
 * below 2^63 (they are stored signed). */
#define SL_IS_U64_u16 0
#define SL_IS_U64_u32 0
#define SL_IS_U64_u64 1
#define SL_IS_U64_text(n) 0
static const struct wire_field {
    uint16_t table, offset, is_u64;
} fields[] = {
#undef  SL_FIELD
#define SL_FIELD(table, name, type, doc) \
    {SL_TABLE_##table, offsetof(sl_rec_##table, name), SL_IS_U64_##type},
#include "stacklens_wire.def"
#undef  SL_FIELD
#define SL_FIELD SL_NOTHING4
};

/* hca.node_guid uses all 64 bits (stored as two's complement): exempt. */
#define HCA_GUID_OFFSET offsetof(sl_rec_hca, node_guid)
/* rank_info.launch_id: an id of 64 random bits, exempt from the counter bound too. */
#define LAUNCH_ID_OFFSET offsetof(sl_rec_rank_info, launch_id)
#define HCA_COUNTERS ((sizeof(sl_rec_hca) - HCA_GUID_OFFSET - 8) / 8)

static int fail(sl_scan_error *err, unsigned status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(sl_scan_error *err, unsigned status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->reason, sizeof err->reason, fmt, ap);
    va_end(ap);
    err->status = status;
    return -1;
}

static uint64_t load64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static uint32_t load32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* Length of a NUL-padded text field. */
static size_t text_len(const char *s, size_t cap)
{
    const char *end = memchr(s, '\0', cap);
    return end ? (size_t)(end - s) : cap;
}

/* Copy a text field cut at its first NUL, zero-filling the rest. */
static void copy_text(char *dst, const char *src, size_t cap)
{
    size_t n = text_len(src, cap);
    memcpy(dst, src, n);
    memset(dst + n, 0, cap - n);
}

/* Whether a header text field (job id, host) is an id (stacklens_text.h), NUL-padded
 * with nothing after the padding starts: ids that break the rule are refused, never
 * stored altered (two different ids must never become one). */
static int clean_text(const char *field, size_t cap)
{
    const uint8_t *s = (const uint8_t *)field;
    size_t len = text_len(field, cap), n;
    for (size_t i = len; i < cap; i++)
        if (s[i] != 0)
            return 0;
    for (size_t i = 0; i < len; i += n)
        if ((n = sl_id_char(s + i, len - i)) == 0)
            return 0;
    return 1;
}

/* Constant-time token comparison (only the bytes before the first NUL count). */
static int token_ok(const sl_frame_header *h, const sl_limits *lim)
{
    size_t have = text_len(h->token, sizeof h->token);
    unsigned diff = (unsigned)(have != lim->token_len);
    for (size_t i = 0; i < sizeof h->token; i++) {
        uint8_t a = i < have ? (uint8_t)h->token[i] : 0;
        uint8_t b = i < lim->token_len ? (uint8_t)lim->token[i] : 0;
        diff |= a ^ b;
    }
    return diff == 0;
}

/* The fixed header checks of wire.decode_header and wire.check_header. */
static int check_header(const sl_frame_header *h, const sl_limits *lim, sl_scan_error *err)
{
    if (h->magic != SL_FRAME_MAGIC)
        return fail(err, SL_STATUS_bad_magic, "bad magic 0x%08x", h->magic);
    if (h->version != SL_WIRE_VERSION)
        return fail(err, SL_STATUS_bad_version, "unsupported wire version %u", h->version);
    switch (h->frame_type) {
#undef  SL_FRAME_TYPE
#define SL_FRAME_TYPE(code, name, doc) case code:
#include "stacklens_wire.def"
#undef  SL_FRAME_TYPE
#define SL_FRAME_TYPE SL_NOTHING3
        break;
    default:
        return fail(err, SL_STATUS_bad_body, "unknown frame type %u", h->frame_type);
    }
    if (h->body_len > lim->max_body)
        return fail(err, SL_STATUS_bad_length, "body of %u bytes exceeds the cap of %llu",
                    h->body_len, (unsigned long long)lim->max_body);
    err->has_seq = 1;
    err->seq = h->seq;
    if (!token_ok(h, lim))
        return fail(err, SL_STATUS_bad_token, "wrong ingest token");
    if (h->job_id[0] == '\0')
        return fail(err, SL_STATUS_out_of_range, "empty job id");
    if (!clean_text(h->job_id, sizeof h->job_id))
        return fail(err, SL_STATUS_out_of_range,
                    "job id is not UTF-8 text without control characters");
    if (!clean_text(h->host, sizeof h->host))
        return fail(err, SL_STATUS_out_of_range,
                    "host is not UTF-8 text without control characters");
    if (h->world_size == 0 || h->world_size > SL_BOUND_max_world_size
        || h->world_rank >= h->world_size)
        return fail(err, SL_STATUS_out_of_range,
                    "rank %u out of range for world size %u (at most %u)", h->world_rank,
                    h->world_size, (unsigned)SL_BOUND_max_world_size);
    if (h->pid > SL_BOUND_max_pid)
        return fail(err, SL_STATUS_out_of_range, "pid %u out of range", h->pid);
    if (h->run_id == 0 && (h->world_size != 1 || h->proc_start_ns == 0))
        return fail(err, SL_STATUS_out_of_range,
                    "a non-MPI frame (run 0) needs world size 1 and a start time");
    if (h->seq >> SL_BOUND_max_counter_bits)
        return fail(err, SL_STATUS_out_of_range, "sequence number out of range");
    if (h->interval_end_ns < h->interval_start_ns)
        return fail(err, SL_STATUS_out_of_range, "interval ends before it starts");
    if (h->interval_end_ns > lim->newest_end)
        return fail(err, SL_STATUS_out_of_range, "clock skew: interval ends after the "
                    "collector's clock plus the skew window (check the sender's clock)");
    if (h->interval_end_ns < lim->oldest_end)
        return fail(err, SL_STATUS_out_of_range, "too old: interval ends before the ingest "
                    "horizon (retention or horizon days)");
    return 0;
}

/* Split the body into sections (wire.decode_body's structural checks). */
static int split_sections(const uint8_t *body, uint32_t len, sl_frame_info *f, sl_scan_error *err)
{
    uint32_t offset = 0;
    while (offset < len) {
        if (len - offset < SL_SECTION_HEADER_SIZE)
            return fail(err, SL_STATUS_bad_body, "section header truncated at byte %u", offset);
        uint16_t table, size;
        uint32_t count;
        memcpy(&table, body + offset, 2);
        memcpy(&size, body + offset + 2, 2);
        memcpy(&count, body + offset + 4, 4);
        offset += SL_SECTION_HEADER_SIZE;
        if (table > SL_MAX_TABLE_ID || record_size[table] == 0)
            return fail(err, SL_STATUS_bad_body, "unknown table id %u", table);
        if (size != record_size[table])
            return fail(err, SL_STATUS_bad_body, "table %s: record size %u, expected %u",
                        table_name[table], size, record_size[table]);
        if (f->section[table])
            return fail(err, SL_STATUS_bad_body, "table %s appears twice", table_name[table]);
        uint64_t bytes = (uint64_t)count * size;
        if (bytes > len - offset)
            return fail(err, SL_STATUS_bad_length, "table %s runs past the body",
                        table_name[table]);
        f->section[table] = (uint32_t)(sizeof(sl_frame_header) + offset);
        f->count[table] = count;
        offset += (uint32_t)bytes;
    }
    return 0;
}

#define RECORDS(frame, f, name) \
    ((const uint8_t *)(frame) + (f)->section[SL_TABLE_##name])
#define FIELD32(rec, name, field) load32((rec) + offsetof(sl_rec_##name, field))

/* Value ranges no correct sender produces (wire._check_ranges). */
static int check_ranges(const uint8_t *frame, sl_frame_info *f, const sl_limits *lim,
                        sl_scan_error *err)
{
    const uint32_t ranks = f->world_size;
    for (unsigned t = 1; t <= SL_MAX_TABLE_ID; t++) {
        if (!f->section[t])
            continue;
        if ((t == SL_TABLE_rank_info || t == SL_TABLE_health || t == SL_TABLE_abort
             || t == SL_TABLE_launch)
            && f->count[t] > 1)
            return fail(err, SL_STATUS_out_of_range, "table %s must have at most one record",
                        table_name[t]);
        uint16_t counters[sizeof fields / sizeof fields[0]];
        size_t n_counters = 0;
        for (size_t k = 0; k < sizeof fields / sizeof fields[0]; k++)
            if (fields[k].table == t && fields[k].is_u64 &&
                !(t == SL_TABLE_hca && fields[k].offset == HCA_GUID_OFFSET) &&
                !(t == SL_TABLE_rank_info && fields[k].offset == LAUNCH_ID_OFFSET))
                counters[n_counters++] = fields[k].offset;
        const uint8_t *rec = frame + f->section[t];
        for (uint32_t i = 0; i < f->count[t]; i++, rec += record_size[t]) {
            uint64_t any = 0;
            for (size_t k = 0; k < n_counters; k++)
                any |= load64(rec + counters[k]);
            if (any >> SL_BOUND_max_counter_bits)
                return fail(err, SL_STATUS_out_of_range,
                            "table %s: a counter is negative or too large", table_name[t]);
        }
    }
#define EACH(name) \
    for (const uint8_t *r = RECORDS(frame, f, name), \
                       *e = r + (size_t)f->count[SL_TABLE_##name] * sizeof(sl_rec_##name); \
         f->section[SL_TABLE_##name] && r < e; r += sizeof(sl_rec_##name))
#define OP_ID_OK(name) \
    EACH(name) if (FIELD32(r, name, op_id) >= lim->n_ops) \
        return fail(err, SL_STATUS_out_of_range, "table " #name ": unknown MPI operation id");
    OP_ID_OK(op)
    OP_ID_OK(hist)
    OP_ID_OK(coll)
    OP_ID_OK(rma)
    OP_ID_OK(comm_p2p)
    EACH(p2p) {
        if (FIELD32(r, p2p, peer) >= ranks)
            return fail(err, SL_STATUS_out_of_range, "peer rank out of range for the world size");
        const sl_rec_p2p *p = (const sl_rec_p2p *)r;
        if ((p->msgs_sent | p->msgs_recv) >> SL_BOUND_max_msgs_bits)
            return fail(err, SL_STATUS_out_of_range, "message count out of range");
    }
    EACH(monitored) {
        if (FIELD32(r, monitored, peer) >= ranks)
            return fail(err, SL_STATUS_out_of_range,
                        "monitored peer rank out of range for the world size");
        if (((const sl_rec_monitored *)r)->msgs >> SL_BOUND_max_msgs_bits)
            return fail(err, SL_STATUS_out_of_range, "monitored message count out of range");
    }
    EACH(rma) if (FIELD32(r, rma, target) >= ranks)
        return fail(err, SL_STATUS_out_of_range,
                    "RMA target rank out of range for the world size");
    EACH(hist) if (FIELD32(r, hist, bucket) > SL_BOUND_max_bucket)
        return fail(err, SL_STATUS_out_of_range, "histogram bucket out of range");
    EACH(coll) {
        uint32_t root = FIELD32(r, coll, root), size = FIELD32(r, coll, comm_size);
        if (root != SL_BOUND_no_rank && root >= ranks)
            return fail(err, SL_STATUS_out_of_range,
                        "collective root out of range for the world size");
        /* Communicators may outgrow the world (spawn, connect/accept), never past the
         * bound; size 0 only in an overflow record (its communicators differ). */
        if ((size == 0 && FIELD32(r, coll, comm_id) != SL_BOUND_overflow_comm)
            || size > SL_BOUND_max_world_size)
            return fail(err, SL_STATUS_out_of_range, "communicator size out of range");
    }
    EACH(comm) {
        uint32_t made = FIELD32(r, comm, made), size = FIELD32(r, comm, comm_size);
        if (made < 1 || made > SL_BOUND_max_comm_made)
            return fail(err, SL_STATUS_out_of_range, "unknown way of making a communicator");
        if (size == 0 || size > SL_BOUND_max_world_size || FIELD32(r, comm, comm_rank) >= size
            || FIELD32(r, comm, comm_id) == SL_BOUND_overflow_comm)
            return fail(err, SL_STATUS_out_of_range, "communicator description out of range");
    }
    EACH(comm_p2p) {
        /* a peer in the world, or no peer in (only) an op's overflow record */
        uint32_t peer = FIELD32(r, comm_p2p, peer);
        int overflow = FIELD32(r, comm_p2p, comm_id) == SL_BOUND_overflow_comm;
        if (overflow ? peer != SL_BOUND_no_rank : peer >= ranks)
            return fail(err, SL_STATUS_out_of_range,
                        "communicator peer rank out of range for the world size");
        if (((const sl_rec_comm_p2p *)r)->msgs >> SL_BOUND_max_msgs_bits)
            return fail(err, SL_STATUS_out_of_range, "communicator message count out of range");
        if (FIELD32(r, comm_p2p, received) > 1)
            return fail(err, SL_STATUS_out_of_range, "communicator message direction unknown");
    }
    OP_ID_OK(callsite)
    EACH(callsite) {
        if (FIELD32(r, callsite, layer) > SL_BOUND_max_site_layer)
            return fail(err, SL_STATUS_out_of_range, "unknown call-site layer");
        if (FIELD32(r, callsite, bucket) > SL_BOUND_max_bucket)
            return fail(err, SL_STATUS_out_of_range, "call-site size bucket out of range");
    }
    EACH(callsite_frame) {
        uint32_t depth = FIELD32(r, callsite_frame, depth);
        if (depth < 1 || depth > SL_BOUND_max_site_depth
            || FIELD32(r, callsite_frame, frame) >= depth
            || FIELD32(r, callsite_frame, site_id) == SL_BOUND_overflow_site)
            return fail(err, SL_STATUS_out_of_range, "call-site frame out of range");
    }
    EACH(io) {
        uint32_t layer = FIELD32(r, io, layer);
        if (layer < 1 || layer > SL_BOUND_max_io_layer)
            return fail(err, SL_STATUS_out_of_range, "unknown I/O layer");
        if (FIELD32(r, io, phase) > SL_BOUND_max_io_phase)
            return fail(err, SL_STATUS_out_of_range, "unknown I/O phase");
    }
    EACH(hca) if (FIELD32(r, hca, valid) >= (1ull << HCA_COUNTERS))
        return fail(err, SL_STATUS_out_of_range, "hca valid mask has bits beyond the counters");
#undef OP_ID_OK
    if ((f->frame_type == SL_FRAME_aborted) != (f->count[SL_TABLE_abort] == 1))
        return fail(err, SL_STATUS_out_of_range,
                    "an abort record belongs in exactly the frames of type aborted");
    if (f->frame_type == SL_FRAME_launch) {
        for (unsigned t = 1; t <= SL_MAX_TABLE_ID; t++)
            if (f->section[t] && t != SL_TABLE_launch && t != SL_TABLE_site_symbol)
                return fail(err, SL_STATUS_out_of_range,
                            "a frame of type launch carries its launch record and the "
                            "call sites resolved on its node only");
        if (f->count[SL_TABLE_launch] != 1 || f->run_id == 0)
            return fail(err, SL_STATUS_out_of_range,
                        "a frame of type launch has one launch record and a launch id");
        EACH(site_symbol) {
            uint32_t q = FIELD32(r, site_symbol, quality);
            if (q < 1 || q > 2)
                return fail(err, SL_STATUS_out_of_range, "site_symbol quality is 1 or 2");
        }
    } else if (f->section[SL_TABLE_launch] || f->section[SL_TABLE_site_symbol]) {
        return fail(err, SL_STATUS_out_of_range,
                    "launch and site_symbol records belong in frames of type launch only");
    }
#undef EACH
    if (f->section[SL_TABLE_health] && f->count[SL_TABLE_health] == 1) {
        const sl_rec_health *h = (const sl_rec_health *)RECORDS(frame, f, health);
        f->keys_dropped = h->keys_dropped;
        f->frames_dropped = h->frames_dropped;
        f->frames_spooled = h->frames_spooled;
    }
    return 0;
}

int64_t sl_scan(const uint8_t *buf, uint64_t len, const sl_limits *lim, sl_frame_info *out,
                uint32_t max_frames, uint64_t *consumed, sl_scan_error *err)
{
    uint64_t offset = 0;
    uint32_t n = 0;
    memset(err, 0, sizeof *err);
    while (n < max_frames && len - offset >= sizeof(sl_frame_header)) {
        const uint8_t *frame = buf + offset;
        sl_frame_header h;
        memcpy(&h, frame, sizeof h);
        if (check_header(&h, lim, err) < 0)
            break;
        err->has_seq = 0;
        if (len - offset < sizeof h + (uint64_t)h.body_len)
            break; /* the body has not arrived yet */
        sl_frame_info *f = &out[n];
        memset(f, 0, sizeof *f);
        f->world_size = h.world_size;
        f->frame_type = h.frame_type;
        f->run_id = h.run_id;
        if (split_sections(frame + sizeof h, h.body_len, f, err) < 0 ||
            check_ranges(frame, f, lim, err) < 0) {
            err->has_seq = 1;
            err->seq = h.seq;
            break;
        }
        f->offset = offset;
        f->seq = h.seq;
        f->t_start = h.interval_start_ns;
        f->t_end = h.interval_end_ns;
        f->run_id = h.run_id;
        f->proc_start = h.proc_start_ns;
        f->length = (uint32_t)(sizeof h + h.body_len);
        f->world_rank = h.world_rank;
        f->pid = h.pid;
        f->frame_type = h.frame_type;
        copy_text(f->job, h.job_id, sizeof f->job);
        copy_text(f->host, h.host, sizeof f->host);
        offset += f->length;
        n++;
    }
    *consumed = offset;
    return n;
}

/* ---- binary COPY encoding -------------------------------------------------- */

static uint8_t *put16(uint8_t *p, uint16_t v)
{
    v = __builtin_bswap16(v);
    memcpy(p, &v, 2);
    return p + 2;
}

static uint8_t *put32(uint8_t *p, uint32_t v)
{
    v = __builtin_bswap32(v);
    memcpy(p, &v, 4);
    return p + 4;
}

static uint8_t *put64(uint8_t *p, uint64_t v)
{
    v = __builtin_bswap64(v);
    memcpy(p, &v, 8);
    return p + 8;
}

static uint64_t column_value(const uint8_t *rec, const sl_column *c)
{
    return c->wire_width == 8 ? load64(rec + c->wire_offset) : load32(rec + c->wire_offset);
}

/* Elements a record becomes: more than one when a narrowed counter overflows int4. */
static uint64_t pieces(const uint8_t *rec, const sl_column *columns, uint32_t n_columns)
{
    uint64_t most = 1;
    for (uint32_t c = 0; c < n_columns; c++) {
        const sl_column *col = &columns[c];
        if (col->is_key || col->out_width != 4 || col->wire_width != 8)
            continue;
        uint64_t v = column_value(rec, col);
        uint64_t k = v == 0 ? 1 : (v + SL_INT4_MAX - 1) / SL_INT4_MAX;
        if (k > most)
            most = k;
    }
    return most;
}

/* Value of piece j of a record's column: keys repeat, counters are cut into int4
 * pieces (narrowed) or go whole into piece 0. */
static uint64_t piece_value(const uint8_t *rec, const sl_column *col, uint64_t j)
{
    uint64_t v = column_value(rec, col);
    if (col->is_key)
        return v;
    if (col->out_width == 4 && col->wire_width == 8) {
        uint64_t done = j * SL_INT4_MAX;
        if (v <= done)
            return 0;
        return v - done < SL_INT4_MAX ? v - done : SL_INT4_MAX;
    }
    return j == 0 ? v : 0;
}

/* One column of n records, one element each (no record split): a loop per width. */
static uint8_t *put_column(uint8_t *p, const uint8_t *rec, size_t size, uint32_t n,
                           const sl_column *col)
{
    rec += col->wire_offset;
#define SL_PUT_LOOP(out, load) \
    for (uint32_t r = 0; r < n; r++, rec += size) \
        p = out(put32(p, col->out_width), load(rec));
    if (col->out_width == 8 && col->wire_width == 8)
        SL_PUT_LOOP(put64, load64)
    else if (col->out_width == 8)
        SL_PUT_LOOP(put64, (uint64_t)load32)
    else if (col->out_width == 4 && col->wire_width == 8)
        SL_PUT_LOOP(put32, (uint32_t)load64)
    else if (col->out_width == 4)
        SL_PUT_LOOP(put32, load32)
    else if (col->wire_width == 8)
        SL_PUT_LOOP(put16, (uint16_t)load64)
    else
        SL_PUT_LOOP(put16, (uint16_t)load32)
#undef SL_PUT_LOOP
    return p;
}

/* Elements the records of one frame's section become: their count, unless a narrowed
 * counter does not fit int4 (then the records are split: `*split` is set). */
static uint64_t frame_elements(const uint8_t *first, size_t size, uint32_t count,
                               const sl_column *columns, uint32_t n_columns, int *split)
{
    int over = 0;
    for (uint32_t c = 0; c < n_columns && !over; c++) {
        const sl_column *col = &columns[c];
        if (col->is_key || col->out_width != 4 || col->wire_width != 8)
            continue;
        const uint8_t *rec = first + col->wire_offset;
        for (uint32_t r = 0; r < count; r++, rec += size)
            over |= load64(rec) > SL_INT4_MAX;
    }
    *split = over;
    if (!over)
        return count;
    uint64_t elements = 0;
    for (uint32_t r = 0; r < count; r++)
        elements += pieces(first + r * size, columns, n_columns);
    return elements;
}

int64_t sl_encode_arrays(uint32_t table_id, const sl_column *columns, uint32_t n_columns,
                         uint32_t n, const uint8_t *const *frames, const sl_frame_info *infos,
                         const int64_t *job_ids, const int64_t *run_ids, const int32_t *ranks,
                         uint32_t *next, uint8_t *out, uint64_t cap)
{
    if (table_id == 0 || table_id > SL_MAX_TABLE_ID || record_size[table_id] == 0)
        return -1;
    const size_t size = record_size[table_id];
    const uint32_t start = *next;
    uint8_t *p = out;
    uint32_t i;
    for (i = start; i < n; i++) {
        const sl_frame_info *f = &infos[i];
        const uint8_t *first = frames[i] + f->section[table_id];
        int split;
        uint64_t elements = frame_elements(first, size, f->count[table_id], columns, n_columns,
                                           &split);
        uint64_t row = 2 + 2 * (4 + 8) + (4 + 4) + 2 * (4 + 8);
        uint32_t arrays = 0;
        for (uint32_t c = 0; c < n_columns; c++) {
            if (!columns[c].joined) {
                arrays++;
                row += 4 + 20;
            }
            row += elements * (4 + columns[c].out_width);
        }
        if (row > cap - (uint64_t)(p - out))
            break;
        p = put16(p, (uint16_t)(5 + arrays));
        p = put64(put32(p, 8), (uint64_t)job_ids[i]);
        p = put64(put32(p, 8), (uint64_t)run_ids[i]);
        p = put32(put32(p, 4), (uint32_t)ranks[i]);
        p = put64(put32(p, 8), f->t_start);
        p = put64(put32(p, 8), f->t_end);
        for (uint32_t c = 0; c < n_columns; c++) {
            const sl_column *col = &columns[c];
            if (!col->joined) { /* an array's header: its columns' elements, all of them */
                uint32_t k = 1;
                while (c + k < n_columns && columns[c + k].joined)
                    k++;
                uint64_t bytes = 0;
                for (uint32_t j = 0; j < k; j++)
                    bytes += elements * (4 + columns[c + j].out_width);
                p = put32(p, (uint32_t)(20 + bytes));
                p = put32(put32(put32(p, 1), 0), col->element_oid); /* ndim, has_null, oid */
                p = put32(put32(p, (uint32_t)(elements * k)), 1);   /* size, lower bound */
            }
            if (!split) {
                p = put_column(p, first, size, f->count[table_id], col);
                continue;
            }
            for (uint32_t r = 0; r < f->count[table_id]; r++) {
                const uint8_t *rec = first + r * size;
                uint64_t k = pieces(rec, columns, n_columns);
                for (uint64_t j = 0; j < k; j++) {
                    uint64_t v = piece_value(rec, col, j);
                    p = put32(p, col->out_width);
                    if (col->out_width == 8)
                        p = put64(p, v);
                    else if (col->out_width == 4)
                        p = put32(p, (uint32_t)v);
                    else
                        p = put16(p, (uint16_t)v);
                }
            }
        }
    }
    *next = i;
    if (i == start && i < n)
        return -2; /* not even one row fits */
    return (int64_t)(p - out);
}

void sl_abi_sizes(uint32_t sizes[4])
{
    sizes[0] = sizeof(sl_limits);
    sizes[1] = sizeof(sl_frame_info);
    sizes[2] = sizeof(sl_scan_error);
    sizes[3] = sizeof(sl_column);
}
