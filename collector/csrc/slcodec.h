/*
 * slcodec.h — interface of libslcodec.so, the collector's compiled frame path.
 *
 * The collector hands this library whole receive buffers: sl_scan() finds the
 * complete frames in them and validates every rule of the wire format (the
 * same rules, with the same statuses, as the reference decoder in
 * stacklens/wire.py; tests/collector/test_fuzz.py checks they agree), and
 * sl_encode_arrays() writes the PostgreSQL binary COPY rows of one
 * array-layout table for a batch of frames. Python loads it with ctypes
 * (collector/codec.py mirrors these structs as numpy dtypes; the
 * sizes are checked at load time through sl_abi_sizes()).
 */
#ifndef SLCODEC_H
#define SLCODEC_H

#include <stdint.h>

/* Table ids are 1..SL_MAX_TABLE_ID; index 0 of per-table arrays is unused. */
#define SL_MAX_TABLE_ID 19

/* What sl_scan() checks frames against. */
typedef struct sl_limits {
    uint64_t max_body;     /* bodies longer than this are rejected */
    uint64_t newest_end;   /* interval ends after this are rejected (now + skew) */
    uint64_t oldest_end;   /* interval ends before this are rejected (0: no limit) */
    uint32_t n_ops;        /* op ids must be below this */
    uint32_t token_len;    /* bytes of token used */
    char token[64];        /* the expected ingest token */
} sl_limits;

/* One valid frame found by sl_scan(). Text fields are cut at the first NUL. */
typedef struct sl_frame_info {
    uint64_t offset;            /* where the frame starts in the scanned buffer */
    uint64_t seq;
    uint64_t t_start;
    uint64_t t_end;
    uint64_t keys_dropped;      /* the health record, 0 if absent */
    uint64_t frames_dropped;
    uint64_t frames_spooled;
    uint64_t run_id;            /* 0 = the job's non-MPI run */
    uint64_t proc_start;        /* the process's start (key of a non-MPI process) */
    uint32_t length;            /* header + body bytes */
    uint32_t world_rank;
    uint32_t world_size;
    uint32_t pid;
    uint32_t frame_type;
    uint32_t pad;
    uint32_t section[SL_MAX_TABLE_ID + 1]; /* first record, bytes from the frame start; 0 = absent */
    uint32_t count[SL_MAX_TABLE_ID + 1];   /* records in that table */
    char job[64];
    char host[64];
} sl_frame_info;

/* Why sl_scan() stopped at a bad frame. */
typedef struct sl_scan_error {
    uint32_t status;      /* an SL_STATUS_* code; 0 = no bad frame */
    uint32_t has_seq;     /* 1 if the bad frame's header was readable: seq is its own */
    uint64_t seq;
    char reason[200];     /* human-readable, NUL-terminated */
} sl_scan_error;

/* One stored column of an array-layout table, read from a wire record field. */
typedef struct sl_column {
    uint16_t wire_offset;  /* of the field in the record */
    uint8_t wire_width;    /* 4 (u32) or 8 (u64) */
    uint8_t out_width;     /* 2, 4 or 8: int2/int4/int8 element */
    uint8_t is_key;        /* keys are repeated when a record is split (see below) */
    uint8_t joined;        /* 1: continues the previous column's array (same element type):
                            * one array holds several fields, `elements` values each */
    uint8_t pad[2];
    uint32_t element_oid;  /* PostgreSQL type oid of the element */
} sl_column;

/*
 * Scan buf[0..len) for consecutive frames. Fills out[] with up to max_frames
 * valid frames and returns their number; *consumed is the bytes they take.
 * Scanning stops at an incomplete frame (err->status = 0: wait for more bytes)
 * or at the first invalid one (err->status != 0, with its reason; nothing of
 * it is in out[]). A header is judged as soon as it is complete, before its
 * body arrives.
 */
int64_t sl_scan(const uint8_t *buf, uint64_t len, const sl_limits *lim, sl_frame_info *out,
                uint32_t max_frames, uint64_t *consumed, sl_scan_error *err);

/*
 * Encode binary COPY rows (no signature, no trailer) of one array-layout table
 * for frames *next.. of n, into out[0..cap): as many whole rows as fit, in one
 * pass; *next is advanced past them. Per frame one row of job_id (job_ids[i]),
 * run_id (run_ids[i]), world_rank (ranks[i]: the frame's world rank, or the
 * process number of a non-MPI process), t_start_ns, t_end_ns and one 1-d array
 * per column, or per run of joined columns (the first column's elements, then
 * the next's: k fields of e elements make one array of k * e). frames[i] points
 * at the frame start of infos[i]; every frame must hold the table's section (an
 * empty section becomes a row of empty arrays). A u64 counter stored narrower
 * (int4) that does not fit is split over several elements of the same key, so
 * sums stay exact. Returns the bytes written, -1 for a table id that is not an
 * array table, -2 if the next row alone does not fit in cap.
 */
int64_t sl_encode_arrays(uint32_t table_id, const sl_column *columns, uint32_t n_columns,
                         uint32_t n, const uint8_t *const *frames, const sl_frame_info *infos,
                         const int64_t *job_ids, const int64_t *run_ids, const int32_t *ranks,
                         uint32_t *next, uint8_t *out, uint64_t cap);

/* sizeof of sl_limits, sl_frame_info, sl_scan_error and sl_column, in that order. */
void sl_abi_sizes(uint32_t sizes[4]);

#endif /* SLCODEC_H */
