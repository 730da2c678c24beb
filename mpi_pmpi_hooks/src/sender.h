/*
 * sender.h — the sender thread of a rank: every interval it turns the
 * counter deltas into a frame, keeps frames in a bounded queue until the
 * collector acknowledges them, and talks TCP to the collector. The MPI call
 * path never waits for it and never touches its socket.
 */
#ifndef SL_SENDER_H
#define SL_SENDER_H

#include <stdint.h>

#include "config.h"
#include "identity.h"

/*
 * Starts the sender thread (sl_core must be initialised; cfg and id must
 * outlive the thread). Returns 0, or -1 with a warning if it cannot start.
 */
int sl_sender_start(const sl_config *cfg, const sl_identity *id);

/*
 * Asks the thread for the final frame of frame_type (SL_FRAME_final, or
 * SL_FRAME_aborted with MPI_Abort's errorcode), spooled first, lets it
 * deliver all queued frames for at most cfg->finalize_timeout_ms, and waits
 * for it to end. Returns 1 if the thread has ended (or never ran), 0 if it
 * did not end in time and was left running detached, in which case the
 * counter tables it reads must not be freed. The builder is kept: see
 * sl_sender_restart and sl_sender_release.
 */
int sl_sender_end(unsigned frame_type, int32_t errorcode);

/* After sl_sender_end returned 1: starts the thread again where it left off
 * (sequence numbers and deltas go on), e.g. after an exec that failed.
 * Returns 0, or -1 with a warning. */
int sl_sender_restart(void);

/* After sl_sender_end returned 1: frees the frame builder and the eventfds. */
void sl_sender_release(void);

/*
 * From a signal handler (async-signal-safe: no locks, no allocation): asks
 * the thread for the final frame like sl_sender_end(), of type
 * SL_FRAME_killed (the rank ends by the signal), and waits until the
 * thread has delivered it and ended, at most cfg->finalize_timeout_ms plus
 * a slack. The thread first writes the final frame and every unacknowledged
 * one to the spool directory (if there is one), then delivers them and
 * deletes each file on its acknowledgement, so a process killed outright
 * during the flush leaves its last interval in the spool for `stacklens
 * replay`. Returns at once if no thread runs. Nothing is freed.
 */
void sl_sender_flush_from_signal(void);

/*
 * Async-signal-safe too, for _exit() (which may be called from a signal
 * handler): the final frame of frame_type (SL_FRAME_final, or SL_FRAME_exited
 * for an MPI rank that did not finalize), delivered within the same bound as
 * above. Nothing is freed.
 */
void sl_sender_flush_at_exit(unsigned frame_type);

#endif /* SL_SENDER_H */
