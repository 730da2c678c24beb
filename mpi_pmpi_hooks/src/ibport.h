/*
 * ibport.h — the host's own InfiniBand port counters, sent with the frames
 * (wire table hca), so a job's own HCA traffic is attached to the job.
 *
 * Read from /sys/class/infiniband/<device>/ports/<port>/counters/ (or the
 * tree under STACKLENS_SYSFS_ROOT) on the sender thread only, never on the
 * MPI call path. One rank per host reports: the lowest world rank among the
 * ranks of its shared-memory node (MPI_COMM_TYPE_SHARED) that carry the same
 * host name (STACKLENS_HOST or the hostname), decided once at MPI_Init, so
 * ranks placed on simulated hosts each report "their" host. Standalone
 * (non-MPI) processes never report.
 *
 * Each record holds per-interval deltas in bytes (port_xmit_data and
 * port_rcv_data count 4-octet words and are multiplied by 4 here, once),
 * packets and ticks. Bit i of its `valid` mask says counter i has a known
 * delta; a counter is unknown (and 0 in the record) when its file is absent
 * now or was at the previous read, when it decreased (a reset by someone
 * else: the new value becomes the baseline), or when it stands at the
 * maximum of its PortCounters width (saturated: the delta would be only a
 * lower bound). A port's record is sent when it has a known non-zero delta
 * or when a counter known in the previous interval is unknown in this one (so
 * a reset interval is stored as unknown, not missing). Ports are found once,
 * when the sender starts, at most SL_IBPORT_MAX_PORTS of them.
 */
#ifndef SL_IBPORT_H
#define SL_IBPORT_H

#include <stddef.h>

#include "stacklens_wire.h"

#define SL_IBPORT_MAX_PORTS 16

/* Largest hca section a frame can carry: section header plus every port. */
#define SL_IBPORT_MAX_SECTION (SL_SECTION_HEADER_SIZE + SL_IBPORT_MAX_PORTS * sizeof(sl_rec_hca))

/*
 * Collective over the world (sl_core.world_comm) when whole (it holds every process of
 * the launch): every rank calls it after PMPI_Init with its host name (wire text).
 * Decides whether this rank reports its host's ports and reads STACKLENS_SYSFS_ROOT.
 * Not whole (a session program's first communicator is over another process set):
 * nothing is exchanged; the rank whose node-local rank the launcher gives as 0
 * (MPI_LOCALRANKID, OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID) reports, none if it
 * gives none. On any MPI error the rank does not report; never fatal.
 */
void sl_ibport_init(const char *host, int whole);

/* On the sender thread, before its first frame: finds the ports and reads
 * the baseline values. Does nothing on a rank that does not report. */
void sl_ibport_start(void);

/*
 * On the sender thread, for each frame: reads the counters and writes the
 * hca section (section header and one record per port with a known non-zero
 * delta) at out, which has room for SL_IBPORT_MAX_SECTION bytes. Returns
 * the bytes written, 0 when there is nothing to send.
 */
size_t sl_ibport_put(unsigned char *out);

#endif /* SL_IBPORT_H */
