/*
 * spool.h — the spool directory (STACKLENS_SPOOL_DIR): frames the collector
 * has not acknowledged while it cannot be reached, and every final frame
 * before its live delivery, are written there, so that they survive the
 * process and are delivered later (by the sender on reconnect while they
 * are still queued, or by `stacklens replay DIR`). A frame the collector
 * rejects is kept in its rejected/ folder (never resent, for inspection).
 * Used only by the sender thread.
 *
 * The default directory is per user, ${TMPDIR:-/tmp}/stacklens-spool-<uid>
 * (config.c). The directory is created 0700 if missing; it (and rejected/)
 * is used only if it is a real directory (not a symlink) owned by the
 * process's user, else spooling is off with one warning. Files are created
 * with O_CREAT|O_EXCL|O_NOFOLLOW relative to the opened directory, so no
 * name planted there (a symlink to another file) is ever followed.
 *
 * FORMAT: one file per frame holding the raw frame bytes exactly as sent
 * (header + body), named
 *     <job>.<run id, 16 hex digits>.<world rank, 10 digits>.<seq, 20 digits>.<pid>.slf
 * where <job> is the job id with every byte outside [A-Za-z0-9._-] replaced
 * by '_' (the real job and run ids are in the frame header), so two runs of
 * one job never share a name. Sorting the names gives the replay order (job,
 * run, rank, seq). A file is written as "<name>.tmp" and
 * renamed, so a complete name is always a complete frame. The sender deletes
 * a file once the collector acknowledges its frame; `stacklens replay`
 * deletes each file after its acknowledgement. The collector drops
 * duplicates by (job, run, rank or process, seq), so a frame delivered twice
 * counts once.
 * The directory is bounded: at most STACKLENS_SPOOL_MAX_MB of frames (the
 * rejected ones included) are written per process, and the directory with its
 * rejected/ folder holds at most STACKLENS_SPOOL_NODE_MAX_MB in all (every
 * process of the user on the node together: each checks the total under an
 * flock of the directory before it writes); beyond either a frame is not
 * spooled (one warning) and stays in the sender's bounded queue, whose
 * overflow is counted as frames dropped.
 */
#ifndef SL_SPOOL_H
#define SL_SPOOL_H

#include <stddef.h>
#include <stdint.h>

/* Prepares spooling into dir (created at the first write) with a cap of
 * max_mb per process and node_max_mb for the directory in all; "" disables
 * the spool. */
void sl_spool_init(const char *dir, unsigned max_mb, unsigned node_max_mb);

/* Writes one frame (buf, len) with sequence number seq. Returns 0, or -1
 * (no spool, over the cap, or a write error: warned once). */
int sl_spool_write(const unsigned char *buf, size_t len, uint64_t seq);

/* Removes the spool file of frame seq (acknowledged). */
void sl_spool_remove(uint64_t seq);

/* Keeps a frame the collector rejected in rejected/ (moving its spool file
 * there if spooled). Returns 0, or -1 if it could not be kept. */
int sl_spool_reject(const unsigned char *buf, size_t len, uint64_t seq, int spooled);

/* The spool directory, "" if none (or refused). */
const char *sl_spool_dir(void);

#endif /* SL_SPOOL_H */
