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
 * hooks' count.
 *
 * Which component (docs/design.md, "Which monitoring component"): the switch also
 * turns on coll/monitoring, which Open MPI 4.1.4 gets wrong on graph and
 * distributed-graph communicators (its neighbourhood collectives read the topology
 * as Cartesian: SIGFPE/SIGSEGV in mca_topo_base_cart_shift, with or without
 * stacklens). When the hooks switch monitoring on themselves they leave
 * coll/monitoring out of the job's coll selection, and since pml/monitoring looks
 * every freed communicator up in coll/monitoring's table (NULL without it: SIGSEGV
 * in MPI_Comm_free/MPI_Finalize), the library exports
 * mca_common_monitoring_coll_new (notes that the table exists) and
 * mca_common_monitoring_coll_cache_name (passed on only then). A job that switches
 * monitoring on itself keeps coll/monitoring as it asked; a graph communicator made
 * then gets one warning from its rank 0.
 *
 * Safety: the recording is two adds into per-peer rows allocated once after
 * PMPI_Init (never freed: the PML may record until the process ends): one row
 * per counter block of core.h, added to with plain stores by the thread
 * holding the block, and a shared row (relaxed atomic adds) for threads
 * without one; on whatever thread sends; no lock, no allocation, no MPI call.
 * The sender thread sums the rows with relaxed loads when it builds a frame
 * (no MPI_T call, so nothing can block or race with the application's own MPI
 * use), before it reads the peer table: the hooks count a send there before the
 * MPI call that records it here (core.h, sl_count_send), so a frame never has
 * a message's monitored bytes without its point-to-point bytes. Under MPICH the
 * module is compiled out.
 */
#ifndef SL_MONITORED_H
#define SL_MONITORED_H

#include <stdint.h>

#include <mpi.h>

#include "config.h"

/* Before PMPI_Init*: unless STACKLENS_MONITOR_TRAFFIC=off, switches Open MPI's
 * monitoring on (OMPI_MCA_pml_monitoring_enable=1) when the environment does not
 * already say otherwise, and then leaves coll/monitoring out (OMPI_MCA_coll). */
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
 * Open MPI, while coll/monitoring is in (the job's own monitoring), one warning (its
 * rank 0, once per process) that it crashes in their neighbourhood collectives. */
void sl_monitored_graph_made(MPI_Comm comm);

#endif /* SL_MONITORED_H */
