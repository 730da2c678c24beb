/*
 * identity.h — who this rank is: job id, host, pid, command line, user. These go
 * into every frame header (job id, host, pid) and the rank_info record.
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
    uint32_t pid;
} sl_identity;

/*
 * Fills id. Job id: SLURM_JOB_ID, else PBS_JOBID, else STACKLENS_JOB_ID,
 * else "<hostname>-<pid>-<unix time>" made by world rank 0 and broadcast
 * (PMPI_Bcast on MPI_COMM_WORLD; so it must be called by every rank, after
 * PMPI_Init, with the same environment). Host: STACKLENS_HOST, else
 * gethostname(). Command: /proc/self/cmdline joined by spaces, at most 255
 * bytes. User: USER, else LOGNAME, else "uid:<real uid>" (no NSS lookup: it
 * may go to the network). Never fails: missing pieces stay empty.
 */
void sl_identity_init(sl_identity *id, int world_rank);

/*
 * Fills id for a standalone process (no MPI): job id "<env job id>.<pid>"
 * when SLURM_JOB_ID, PBS_JOBID or STACKLENS_JOB_ID is set, else
 * "<hostname>-<pid>-<unix time>"; host and command as above.
 */
void sl_identity_init_standalone(sl_identity *id);

#endif /* SL_IDENTITY_H */
