/*
 * identity.h — who this rank is: job id, run, host, pid, start time, command
 * line, user. These go into every frame header (job id, run id, host, pid,
 * start time) and the rank_info record (command, user, run label, launch id, the
 * executable's build-id and path, the network devices the rank's MPI was told to use).
 */
#ifndef SL_IDENTITY_H
#define SL_IDENTITY_H

#include <stdint.h>

#include "stacklens_wire.h"

typedef struct sl_identity {
    char job_id[sizeof(((sl_frame_header *)0)->job_id)];     /* wire text, NUL-padded */
    char host[sizeof(((sl_frame_header *)0)->host)];         /* wire text, NUL-padded */
    char command[sizeof(((sl_rec_rank_info *)0)->command)];  /* wire text, NUL-terminated */
    char user[sizeof(((sl_rec_rank_info *)0)->user)];        /* wire text, NUL-padded */
    char run_label[sizeof(((sl_rec_rank_info *)0)->run_label)]; /* wire text, NUL-padded */
    char exe_build_id[sizeof(((sl_rec_rank_info *)0)->exe_build_id)]; /* hex, NUL-padded */
    char net_devices[sizeof(((sl_rec_rank_info *)0)->net_devices)]; /* wire text, NUL-padded */
    char exe_path[sizeof(((sl_rec_rank_info *)0)->exe_path)]; /* wire text, NUL-padded */
    uint64_t run_id;        /* agreed by every rank of one MPI launch; 0 = non-MPI run */
    uint64_t launch_id;     /* STACKLENS_LAUNCH_ID (set by `stacklens run`), else 0 */
    uint64_t proc_start_ns; /* set by the library constructor, left alone here */
    uint32_t pid;
} sl_identity;

/*
 * Fills id. Job id: SLURM_JOB_ID, else PBS_JOBID, else STACKLENS_JOB_ID,
 * else "<hostname>-<pid>-<unix time>" made by world rank 0. Run id: 64 random
 * non-zero bits drawn by world rank 0, so every launch is a run of its own;
 * both are broadcast in one PMPI_Bcast on the world (sl_core.world_comm) (so it must be called
 * by every rank, after PMPI_Init, with the same environment) when whole (the world
 * communicator holds every process of the launch). Otherwise (a session program whose
 * first communicator is over another process set) nothing is exchanged: both come from
 * a key of the launch that its launcher gives every process alike (`stacklens run`'s
 * launch id, Hydra's control port, the PMIx namespace, Open MPI 4's job id, a Slurm
 * step): run id a hash of job id and
 * key, job id "launch-<hash of the key>" if the environment has none. Run label:
 * SLURM_STEP_ID, else empty. Network devices: "NAME=value" of the first of
 * UCX_NET_DEVICES, OMPI_MCA_btl_openib_if_include, FI_VERBS_DEVICE_NAME, MV2_IBA_HCA
 * that is set and not empty (cut at the field's size), else empty. Host: STACKLENS_HOST, else
 * gethostname(). Command: /proc/self/cmdline joined by spaces, at most 255
 * bytes. User: USER, else LOGNAME, else "uid:<real uid>" (no NSS lookup: it
 * may go to the network). Executable's build-id: its GNU build-id note in hex, empty
 * if it has none. Executable's path: readlink("/proc/self/exe"), at most PATH_MAX bytes
 * read, a longer path than the field as its prefix and a hash (sl_copy_path), empty if
 * unreadable. Never fails: missing pieces stay empty.
 */
void sl_identity_init(sl_identity *id, int world_rank, int whole);

/*
 * Fills id for a standalone process (no MPI): job id SLURM_JOB_ID, PBS_JOBID
 * or STACKLENS_JOB_ID as above (the process joins that job's one non-MPI run,
 * run id 0, told apart by host, pid and start time), else
 * "<hostname>-<pid>-<unix time>"; host, command, executable's build-id and path as above.
 */
void sl_identity_init_standalone(sl_identity *id);

/*
 * In an MPI launcher started with the library preloaded (mpiexec, mpirun, orterun,
 * prterun; not its daemons): gives this launch an id of its own when it has none
 * (STACKLENS_LAUNCH_ID unset: not under `stacklens run`), 64 random bits, set in the
 * launcher's environment before it starts anything, so that every rank it starts with
 * its environment (Hydra: all of it; Open MPI: its own node, other nodes with -x) reads
 * the same id. A sessions program whose first communicator is not over mpi://WORLD
 * derives its run id from it (launch_key), so two launches never share a run id,
 * whatever port or job id they reuse. Call once, single-threaded (the constructor).
 */
void sl_identity_launcher_id(void);

#endif /* SL_IDENTITY_H */
