/*
 * monitored.h — monitored traffic: the bytes and messages the MPI itself counts as sent
 * to each peer, collectives' internal messages included (wire table 11, monitored).
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
 * of the PML's call) and adds the message to per-peer counters when the
 * component itself records (its exported mca_common_monitoring_current_state
 * is non-zero). The stored bytes per peer are therefore exactly what the
 * component counts (and dumps at MPI_Finalize with pml_monitoring_enable_output).
 *
 * Cost (bench/RESULTS.md, "Hook library overhead"): the component costs every
 * message sent a rank lookup in a hash table and its own recording (four
 * lock-prefixed adds). When the hooks switched the component on themselves
 * (the environment set none of pml_monitoring_enable, _enable_output,
 * _filename), nothing reads the component's own counts (Open MPI 4.1 drops its
 * MPI_T variables, no dump is asked for), so its recording function is not
 * called: the counts stored are the same. Otherwise it is called after the
 * hooks' count. The coll monitoring component comes with it (Open MPI 4.1.4
 * crashes in MPI_Finalize when it is excluded with coll=^monitoring, and in
 * MPI_Comm_free: pml/monitoring looks communicators up in coll/monitoring's table).
 *
 * Known fault of the component: Open MPI 4.1.4's coll/monitoring reads every
 * communicator's topology as a Cartesian one in its neighbourhood collectives, so on a
 * graph or distributed-graph communicator they die of SIGFPE or SIGSEGV
 * (mca_topo_base_cart_shift), with or without stacklens once monitoring is on; it
 * cannot be switched off per communicator. When such a communicator is made while
 * the traffic is monitored, rank 0 of it says so once and names the remedy
 * (STACKLENS_MONITOR_TRAFFIC=off), so a crash that may follow is explained.
 *
 * Safety: the recording is two adds into per-peer rows allocated once after
 * PMPI_Init (never freed: the PML may record until the process ends): one row
 * per counter block of core.h, added to with plain stores by the thread
 * holding the block, and a shared row (relaxed atomic adds) for threads
 * without one; on whatever thread sends; no lock, no allocation, no MPI call.
 * The sender thread sums the rows with relaxed loads when it builds a frame
 * (no MPI_T call, so nothing can block or race with the application's own MPI
 * use). Under MPICH the module is compiled out.
 */
#ifndef SL_MONITORED_H
#define SL_MONITORED_H

#include <stdint.h>

#include <mpi.h>

#include "config.h"

/* Before PMPI_Init*: unless STACKLENS_MONITOR_TRAFFIC=off, switches Open MPI's
 * monitoring on (OMPI_MCA_pml_monitoring_enable=1) when the environment does not
 * already say otherwise. */
void sl_monitored_prepare(void);

/* After PMPI_Init* (world_size ranks): if the monitoring component is active,
 * allocates the per-peer counters and starts counting (returns 1); else
 * returns 0 (STACKLENS_MONITOR_TRAFFIC=on: one warning line on rank 0). */
int sl_monitored_start(int world_rank, int world_size);

/* 1 while the traffic is monitored (the frames carry the monitored section). */
int sl_monitored_active(void);

/* Copies the cumulative bytes and messages sent to peer (< world size). */
void sl_monitored_load(int peer, uint64_t *bytes, uint64_t *msgs);

/* A communicator `comm` with a graph or distributed-graph topology was made: under
 * Open MPI, while the traffic is monitored, one warning (its rank 0, once per process)
 * that the monitoring component may crash in its neighbourhood collectives. */
void sl_monitored_graph_made(MPI_Comm comm);

#endif /* SL_MONITORED_H */
