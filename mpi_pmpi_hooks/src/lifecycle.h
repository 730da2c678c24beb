/*
 * lifecycle.h — start and stop of libstacklens inside a process.
 *
 * At load (a library constructor) the configuration is read and the I/O
 * table set up, unless the process is an MPI launcher (mpirun, mpiexec,
 * orterun, orted, prterun, prted, mpiexec.hydra, hydra_pmi_proxy), which is
 * never profiled. An MPI rank starts its counter tables and sender thread
 * after PMPI_Init* (the generated MPI_Init* wrappers) and stops them before
 * PMPI_Finalize. A process that was not started by an MPI launcher (no
 * OMPI_COMM_WORLD_SIZE, PMIX_RANK, PMI_RANK, PMI_SIZE in its environment)
 * starts at its first tracked file-system I/O (an open of a regular file
 * outside /proc, /sys and /dev through a wrapped call), and sends nothing
 * before it (a process that never does any sends nothing at all): with a job
 * id in the environment it joins that job's one non-MPI run (run id 0; many
 * processes share it, each keyed by host, pid and start time), else it is a
 * job "<host>-<pid>-<time>" of its own; it streams its I/O.
 * STACKLENS_DISABLE=processes switches such processes off entirely.
 * A forked child stops counting (its parent's sender thread is not in it).
 * MPI_Abort delivers a final frame of type aborted (with the error code)
 * before the job is torn down; an exec* delivers the interval so far as a
 * final frame before the image is replaced, and counting resumes if it fails.
 * SIGTERM (and SIGINT in an MPI rank), when it has its default action once
 * counting starts, first lets the sender thread spool and then deliver the
 * last interval (the handler only makes async-signal-safe calls and waits at
 * most STACKLENS_FINALIZE_TIMEOUT_MS plus a slack), then takes the default
 * action.
 */
#ifndef SL_LIFECYCLE_H
#define SL_LIFECYCLE_H

#include "core.h"

/* Before PMPI_Init*: marks the thread inside MPI and starts timing. Returns
 * 0 if this is a nested call (Fortran MPI_Init calling the C one). */
int sl_init_begin(sl_call *call, const void *site);

/*
 * After PMPI_Init* returned rc: unless disabled or failed, sets up identity
 * (collective on MPI_COMM_WORLD when the job id is generated), the counter
 * tables and the sender thread, counts the init call as op, and turns
 * counting on. On any local failure stacklens stays off and the job runs on.
 */
void sl_init_end(sl_call *call, int op, int rc);

/* Before PMPI_Finalize: counts the call as op, sends the final frame, waits
 * for the sender (bounded by STACKLENS_FINALIZE_TIMEOUT_MS) and marks the
 * thread inside MPI. Returns 0 for a nested call. */
int sl_finalize_begin(int op, const void *site);

/* After PMPI_Finalize: the thread is outside MPI again (if outer). */
void sl_finalize_end(int outer);

/*
 * MPI-4 sessions (the session wrapper classes). A process without MPI_Init starts
 * counting at its first MPI_Comm_create_from_group: the world communicator is that
 * communicator (a duplicate), the world ranks and size those of mpi://WORLD whatever
 * process set it is over (read from a session of the hooks' own, local calls only; no
 * collective on a communicator that is not the whole launch: identity.h). Session calls
 * made before are counted then. Several sessions may be
 * open; the last MPI_Session_finalize sends the final frame (and so does it after
 * MPI_Finalize in a process that mixes both; without it, the process's exit).
 */
int sl_session_begin(sl_call *call, const void *site);
void sl_session_end(sl_call *call, int op, int rc, int opens);
void sl_session_comm_end(sl_call *call, int op, int rc, MPI_Comm newcomm);
int sl_session_finalize_begin(int op, const void *site);

/* Before PMPI_Abort (errorcode: its argument): counts the call as op and
 * delivers the final frame, of type aborted with the error code, within
 * STACKLENS_FINALIZE_TIMEOUT_MS. */
void sl_abort_begin(int op, int errorcode, const void *site);

/* Before an exec* call: delivers the interval so far as a final frame and
 * stops the sender; returns 1 if it did. */
int sl_exec_begin(void);

/* After an exec* call that returned (it failed): restarts the sender if
 * sl_exec_begin stopped it, so counting goes on. */
void sl_exec_failed(int began);

/* Starts the standalone job of a process without MPI (see above), once;
 * cheap when already started or not applicable. */
void sl_standalone_start(void);

#endif /* SL_LIFECYCLE_H */
