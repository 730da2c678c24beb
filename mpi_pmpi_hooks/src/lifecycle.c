/*
 * lifecycle.c — brings libstacklens up after PMPI_Init and down before
 * PMPI_Finalize (see lifecycle.h). A process that exits without
 * MPI_Finalize still sends its final frame from a library destructor.
 */
#include "lifecycle.h"

#include <unistd.h>

#include "config.h"
#include "identity.h"
#include "sender.h"

static sl_config config;
static sl_identity identity;
static pid_t started_pid; /* the process that started the sender, 0 if none */

/* Loads the configuration and starts timing PMPI_Init*. */
void sl_init_begin(sl_call *call)
{
    sl_config_load(&config);
    /* Calls the MPI library makes during its own init are not counted. */
    sl_tls_in_call = 1;
    call->t0 = sl_mono_ns();
}

/* Brings up identity, tables and sender after a successful PMPI_Init*. */
void sl_init_end(sl_call *call, int op, int rc)
{
    sl_mark_end(call);
    sl_tls_in_call = 0;
    int rank;
    if (rc != MPI_SUCCESS || config.disable_mpi
        || PMPI_Comm_rank(MPI_COMM_WORLD, &rank) != MPI_SUCCESS)
        return;
    /* Collective when the job id is generated: done before anything that
     * could fail on one rank only, so that every rank takes part. */
    sl_identity_init(&identity, rank);
    if (sl_core_init() != 0)
        return;

    sl_core.ops[op].calls = 1;
    sl_core.ops[op].time_ns = call->t1 - call->t0;
    if (sl_sender_start(&config, &identity) != 0) {
        sl_core_fini();
        return;
    }
    started_pid = getpid();
    __atomic_store_n(&sl_core.ready, 1, __ATOMIC_RELEASE);
}

/*
 * Turns counting off and stops the sender after its final frame. Returns 1
 * if the tables may now be freed (the sender thread has ended), else 0.
 */
static int stop_counting(void)
{
    if (started_pid != getpid() || !__atomic_load_n(&sl_core.ready, __ATOMIC_ACQUIRE))
        return 0; /* never started, already stopped, or a forked child */
    __atomic_store_n(&sl_core.ready, 0, __ATOMIC_RELEASE);
    return sl_sender_stop();
}

/* MPI_Finalize path: final frame, sender stop, tables freed. */
void sl_shutdown(void)
{
    if (stop_counting())
        sl_core_fini();
}

/*
 * Process exit without MPI_Finalize: deliver the final frame all the same.
 * The tables are left to the exiting process: other threads may still be
 * inside a wrapper, and MPI may no longer be usable.
 */
__attribute__((destructor)) static void sl_at_exit(void)
{
    stop_counting();
}
