/*
 * wiremon.h — on-wire traffic measured by the MPI itself (wire table 11).
 *
 * Open MPI's monitoring component (pml/monitoring, switched on by
 * pml_monitoring_enable) sits under the PML and records every message the
 * PML sends — point-to-point and the internal messages of collectives — with
 * its peer's world rank and size, through one call into its common library,
 * mca_common_monitoring_record_pml(). It exposes these counts as the MPI_T
 * performance variables pml_monitoring_messages_count/_size, but Open MPI 4.1
 * drops those variables during MPI_Init (the monitoring PML is closed as a
 * component after it hijacked the PML: every index of the pml_monitoring
 * group is invalid afterwards, MPI_T_pvar_get_index answers
 * MPI_T_ERR_INVALID_NAME, and binding a handle before MPI_Init crashes in the
 * component — open-mpi/ompi#9260, checked here with Open MPI 4.1.4). So the
 * library takes the same counts where the component makes them: it exports
 * mca_common_monitoring_record_pml (preloaded, it comes first in the lookup
 * of the PML's call), adds the message to per-peer counters when the
 * component itself records (its exported mca_common_monitoring_current_state
 * is non-zero), and calls the component's own function. The stored bytes per
 * peer are therefore exactly what the component counts (and dumps at
 * MPI_Finalize with pml_monitoring_enable_output).
 *
 * Safety: the recording is two relaxed atomic adds into an array of world
 * size allocated once after PMPI_Init (never freed: the PML may record until
 * the process ends), on whatever thread sends; no lock, no allocation, no MPI
 * call. The sender thread reads the counters with relaxed loads when it
 * builds a frame (no MPI_T call, so nothing can block or race with the
 * application's own MPI use). Under MPICH the module is compiled out.
 */
#ifndef SL_WIREMON_H
#define SL_WIREMON_H

#include <stdint.h>

#include "config.h"

/* Before PMPI_Init*: unless STACKLENS_MEASURE_WIRE=off, switches Open MPI's
 * monitoring on (OMPI_MCA_pml_monitoring_enable=1) when the environment does not
 * already say otherwise. */
void sl_wiremon_prepare(void);

/* After PMPI_Init* (world_size ranks): if the monitoring component is active,
 * allocates the per-peer counters and starts counting (returns 1); else
 * returns 0 (STACKLENS_MEASURE_WIRE=on: one warning line on rank 0). */
int sl_wiremon_start(int world_rank, int world_size);

/* 1 while the on-wire traffic is measured (the frames carry the wire section). */
int sl_wiremon_active(void);

/* Copies the cumulative bytes and messages sent to peer (< world size). */
void sl_wiremon_load(int peer, uint64_t *bytes, uint64_t *msgs);

#endif /* SL_WIREMON_H */
