/*
 * snapshot.h — a rank's crash snapshot: under `stacklens run` (STACKLENS_SNAPSHOT_DIR
 * set to a directory of its own on the launch node), every MPI rank keeps in a file of
 * that directory, <pid>.snap, the frame that would end it if it died now
 * (sl_frame_peek: what it counted since its last frame, op and p2p tables). The sender
 * thread rewrites it every SL_SNAPSHOT_NS; the MPI call path never touches it. A rank
 * that ends with its final frame delivered or spooled removes its file, so a file
 * left after the launch is a rank that died without one (SIGSEGV, SIGKILL):
 * `stacklens run` sends its snapshot as that rank's final frame, of type killed
 * (stacklens_cli/snapshots.py). Beside it, <pid>.sites holds the rank's call-site
 * frames as it described them (sl_snapshot_sites), for `stacklens run` to resolve.
 *
 * File layout (little-endian, read by stacklens_cli/snapshots.py), SL_SNAPSHOT_FILE bytes:
 *   u32 magic      SL_SNAPSHOT_MAGIC, "SLSS"
 *   u32 version    1
 *   u32 slot       which slot holds the newest snapshot (0 or 1), stored last
 *   u32 length[2]  bytes of the frame in each slot (0: none yet)
 *   ...            zeros up to SL_SNAPSHOT_HEADER
 *   slot 0, slot 1 SL_SNAPSHOT_SLOT bytes each: one wire frame (stacklens_wire.h)
 * A snapshot is written into the slot not published, then published by storing its
 * index: a process killed in the middle of a write leaves the previous one whole.
 */
#ifndef SL_SNAPSHOT_H
#define SL_SNAPSHOT_H

#include "frame.h"

#define SL_SNAPSHOT_MAGIC 0x53534C53u /* the bytes "SLSS" */
#define SL_SNAPSHOT_VERSION 1u
#define SL_SNAPSHOT_HEADER 64u
#define SL_SNAPSHOT_FILE (64u * 1024u)
#define SL_SNAPSHOT_SLOT ((SL_SNAPSHOT_FILE - SL_SNAPSHOT_HEADER) / 2u)
#define SL_SNAPSHOT_NS 100000000ull /* 100 ms between snapshots */

/* Creates this rank's file if STACKLENS_SNAPSHOT_DIR names a directory of this user
 * that only it may use (else one warning, and no snapshot). MPI ranks only (id's run
 * id is not 0); at start-up, before the sender thread runs. */
void sl_snapshot_open(const sl_identity *id);

/* 1 if this rank keeps a snapshot. */
int sl_snapshot_active(void);

/* Writes the snapshot of b now (sender thread; nothing if no file is open). */
void sl_snapshot_write(const sl_frame_builder *b);

/* The rank's final frame is delivered or spooled: its file is removed and closed (the
 * sites file stays: `stacklens run` reads it after the launch). */
void sl_snapshot_remove(void);

/* Appends the frames of one newly described call site (callsite_frame records) to
 * <pid>.sites in the snapshot directory, for `stacklens run` to resolve them on this
 * node after the launch (stacklens_cli/node_sites.py). Sender thread, once per site;
 * nothing when this rank keeps no snapshot; bounded by the call-site bound. */
void sl_snapshot_sites(const sl_rec_callsite_frame *recs, unsigned n);

#endif /* SL_SNAPSHOT_H */
