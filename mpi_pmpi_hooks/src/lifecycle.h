/*
 * lifecycle.h — start and stop of libstacklens inside a rank, called by the
 * generated MPI_Init*, MPI_Finalize wrappers: configuration, identity,
 * counter tables and sender thread are brought up and torn down here.
 */
#ifndef SL_LIFECYCLE_H
#define SL_LIFECYCLE_H

#include "core.h"

/* Before PMPI_Init*: reads the configuration and starts timing the call. */
void sl_init_begin(sl_call *call);

/*
 * After PMPI_Init* returned rc: unless disabled or failed, sets up identity
 * (collective on MPI_COMM_WORLD when the job id is generated), the counter
 * tables and the sender thread, counts the init call as op, and turns
 * counting on. On any local failure stacklens stays off and the job runs on.
 */
void sl_init_end(sl_call *call, int op, int rc);

/*
 * Before PMPI_Finalize: turns counting off, sends the final frame, waits for
 * the sender thread (bounded by STACKLENS_FINALIZE_TIMEOUT_MS) and frees the
 * tables. A process that exits without MPI_Finalize gets the same final
 * frame from a library destructor.
 */
void sl_shutdown(void);

#endif /* SL_LIFECYCLE_H */
