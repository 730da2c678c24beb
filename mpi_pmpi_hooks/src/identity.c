/*
 * identity.c — job id, run, host name and command line of the rank (see
 * identity.h).
 */
#define _GNU_SOURCE
#include "identity.h"

#include <errno.h>

#include <fcntl.h>
#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "callsite.h"
#include "config.h"
#include "core.h"
#include "keytab.h"
#include "util.h"

/* The first of SLURM_JOB_ID, PBS_JOBID, STACKLENS_JOB_ID that is set and not empty. */
static const char *job_id_from_env(void)
{
    const char *const values[] = { getenv("SLURM_JOB_ID"), getenv("PBS_JOBID"),
                                   sl_env(SL_SET_JOB_ID) };
    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++)
        if (values[i] != NULL && *values[i] != '\0')
            return values[i];
    return NULL;
}

/* This machine's host name, or "unknown". */
static void local_hostname(char *buf, size_t n)
{
    if (gethostname(buf, n) != 0)
        snprintf(buf, n, "unknown");
    buf[n - 1] = '\0';
}

/* Fills id->user from USER or LOGNAME, else "uid:<real uid>" (no NSS lookup). */
static void read_user(sl_identity *id)
{
    const char *name = getenv("USER");
    if (name == NULL || name[0] == '\0')
        name = getenv("LOGNAME");
    char uid[32];
    if (name == NULL || name[0] == '\0') {
        snprintf(uid, sizeof uid, "uid:%u", (unsigned)getuid());
        name = uid;
    }
    sl_copy_text(id->user, sizeof id->user, name);
}

/* Reads /proc/self/cmdline into id->command, arguments joined by spaces. */
static void read_command(sl_identity *id)
{
    char raw[4096];
    ssize_t len = 0;
    int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        len = read(fd, raw, sizeof raw - 1);
        close(fd);
    }
    if (len <= 0) {
        sl_copy_text(id->command, sizeof id->command, "");
        return;
    }
    while (len > 0 && raw[len - 1] == '\0') /* the last argument's terminator */
        len--;
    for (ssize_t i = 0; i < len; i++)
        if (raw[i] == '\0')
            raw[i] = ' ';
    raw[len] = '\0';
    /* Keep the last byte of the field a NUL: at most 255 bytes of text. */
    sl_copy_text(id->command, sizeof id->command - 1, raw);
    id->command[sizeof id->command - 1] = '\0';
}

/* Reads the executable's path (the target of /proc/self/exe) into id->exe_path: at most
 * PATH_MAX bytes, a path longer than the field as its prefix and a hash of the whole
 * (sl_copy_path); empty if unreadable. */
static void read_exe_path(sl_identity *id)
{
    char path[PATH_MAX + 1];
    ssize_t len = readlink("/proc/self/exe", path, sizeof path - 1);
    path[len > 0 ? len : 0] = '\0';
    sl_copy_path(id->exe_path, sizeof id->exe_path, path);
}

/* Host and pid of id; the local host name into hostname (n bytes). */
static void host_and_pid(sl_identity *id, char *hostname, size_t n)
{
    local_hostname(hostname, n);
    id->pid = (uint32_t)getpid();
    const char *host = sl_env(SL_SET_HOST);
    sl_copy_id(id->host, sizeof id->host, host != NULL && *host != '\0' ? host : hostname);
}

/* "<hostname>-<pid>-<time>" into id->job_id (sl_copy_id if it is too long). */
static void generate_job_id(sl_identity *id, const char *hostname)
{
    char made[512];
    snprintf(made, sizeof made, "%s-%u-%lld", hostname, (unsigned)id->pid, (long long)time(NULL));
    sl_copy_id(id->job_id, sizeof id->job_id, made);
}

/* 64 random bits, never 0 (getrandom; the clock and pid mixed in if it fails). */
static uint64_t random_run_id(void)
{
    uint64_t v = 0;
    if (getrandom(&v, sizeof v, GRND_NONBLOCK) != (ssize_t)sizeof v) {
        v = sl_real_ns() ^ ((uint64_t)getpid() << 32);
        v ^= v >> 33; /* splitmix64 finaliser: spread the bits */
        v *= 0xff51afd7ed558ccdull;
        v ^= v >> 33;
    }
    return v != 0 ? v : 1;
}

void sl_identity_launcher_id(void)
{
    static const char *const top[] = { "mpirun", "mpiexec", "orterun", "prterun" };
    const char *me = program_invocation_short_name;
    int launcher = 0;
    for (size_t i = 0; i < sizeof top / sizeof top[0]; i++)
        launcher |= strncmp(me, top[i], strlen(top[i])) == 0;
    const char *set = sl_env(SL_SET_LAUNCH_ID);
    if (!launcher || (set != NULL && *set != '\0'))
        return;
    char text[17];
    snprintf(text, sizeof text, "%016llx", (unsigned long long)random_run_id());
    setenv(sl_env_name(SL_SET_LAUNCH_ID), text, 0);
}

/* The launch this process belongs to (`stacklens run`'s or its launcher's):
 * STACKLENS_LAUNCH_ID, 16 hex digits; 0 when unset or malformed. */
static uint64_t launch_id_from_env(void)
{
    const char *text = sl_env(SL_SET_LAUNCH_ID);
    if (text == NULL || strlen(text) != 16)
        return 0;
    uint64_t v = 0;
    for (const char *c = text; *c; c++) {
        int d = (*c >= '0' && *c <= '9') ? *c - '0' : (*c >= 'a' && *c <= 'f') ? *c - 'a' + 10 : -1;
        if (d < 0)
            return 0;
        v = v << 4 | (uint64_t)d;
    }
    return v;
}

/* Identity of a process without MPI: the job's non-MPI run (run id 0). */
void sl_identity_init_standalone(sl_identity *id)
{
    char hostname[256];
    host_and_pid(id, hostname, sizeof hostname);
    const char *job = job_id_from_env();
    memset(id->job_id, 0, sizeof id->job_id);
    if (job != NULL)
        sl_copy_id(id->job_id, sizeof id->job_id, job);
    else
        generate_job_id(id, hostname);
    id->run_id = 0;
    id->launch_id = launch_id_from_env();
    memset(id->run_label, 0, sizeof id->run_label);
    memset(id->net_devices, 0, sizeof id->net_devices);
    read_command(id);
    read_exe_path(id);
    read_user(id);
    sl_exe_build_id(id->exe_build_id, sizeof id->exe_build_id);
}

/* The network devices the rank's MPI was told to use: "NAME=value" of the first of
 * these variables that is set and not empty (UCX: Open MPI's pml ucx and MPICH's
 * ch4:ucx; Open MPI's openib BTL; libfabric's verbs provider: MPICH's ch4:ofi;
 * MVAPICH2; then how many NICs MPICH's ch4:ofi may use, under its two names), else
 * empty; cut at the field's size. */
static void read_net_devices(sl_identity *id)
{
    static const char *const vars[] = { "UCX_NET_DEVICES", "OMPI_MCA_btl_openib_if_include",
                                        "FI_VERBS_DEVICE_NAME", "MV2_IBA_HCA",
                                        "MPIR_CVAR_CH4_OFI_MAX_NICS", "MPICH_CH4_OFI_MAX_NICS" };
    memset(id->net_devices, 0, sizeof id->net_devices);
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (v != NULL && *v != '\0') {
            char both[sizeof id->net_devices + 1];
            snprintf(both, sizeof both, "%s=%s", vars[i], v);
            sl_copy_text(id->net_devices, sizeof id->net_devices, both);
            return;
        }
    }
}

/* Launch id (STACKLENS_LAUNCH_ID), run label (SLURM_STEP_ID), network devices, command
 * line, executable's path, user and executable's build-id of id. */
static void finish_identity(sl_identity *id)
{
    id->launch_id = launch_id_from_env();
    memset(id->run_label, 0, sizeof id->run_label);
    const char *step = getenv("SLURM_STEP_ID");
    if (step != NULL)
        sl_copy_text(id->run_label, sizeof id->run_label, step);
    read_net_devices(id);
    read_command(id);
    read_exe_path(id);
    read_user(id);
    sl_exe_build_id(id->exe_build_id, sizeof id->exe_build_id);
}

/* The value of option `name` ("--control-port") in a NUL-separated command line of len
 * bytes into out (n bytes); 0, or -1 if absent. */
static int cmdline_option(const char *cmd, size_t len, const char *name, char *out, size_t n)
{
    for (size_t i = 0; i < len; i += strlen(cmd + i) + 1) {
        size_t next = i + strlen(cmd + i) + 1;
        if (strcmp(cmd + i, name) == 0 && next < len) {
            sl_copy_text(out, n, cmd + next);
            return 0;
        }
    }
    return -1;
}

/*
 * Hydra (MPICH's mpiexec) gives its ranks nothing alike in their environment but
 * PMI_SIZE; each rank's nearest hydra_pmi_proxy ancestor (one per node) was started with
 * the mpiexec's "--control-port host:port", the same on every node of one launch. Writes
 * "hydra:<host:port>" into out; 0, or -1 if no such ancestor (a few levels up: the rank
 * may be started through a shell).
 */
static int hydra_launch(char *out, size_t n)
{
    pid_t pid = getppid();
    for (int level = 0; level < 4 && pid > 1; level++) {
        char path[64], buf[4096], name[64];
        snprintf(path, sizeof path, "/proc/%d/cmdline", (int)pid);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        ssize_t len = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
        if (fd >= 0)
            close(fd);
        if (len > 0) {
            buf[len] = '\0';
            const char *base = strrchr(buf, '/');
            if (strcmp(base != NULL ? base + 1 : buf, "hydra_pmi_proxy") == 0) {
                if (cmdline_option(buf, (size_t)len, "--control-port", name, sizeof name) != 0)
                    return -1;
                snprintf(out, n, "hydra:%s", name);
                return 0;
            }
        }
        /* the parent's parent: field 4 of /proc/<pid>/stat, after the ")" of the name */
        snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        len = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
        if (fd >= 0)
            close(fd);
        if (len <= 0)
            return -1;
        buf[len] = '\0';
        const char *end = strrchr(buf, ')');
        int ppid = 0;
        if (end == NULL || sscanf(end + 1, " %*c %d", &ppid) != 1)
            return -1;
        pid = (pid_t)ppid;
    }
    return -1;
}

/*
 * A text naming this launch, the same in every process of it, from what the launcher
 * gives each process alike (written into out, n bytes); 0, or -1 if none is found:
 * the launch id (random per launch: `stacklens run`'s or the preloaded launcher's,
 * sl_identity_launcher_id), Hydra's control port (hydra_launch),
 * the PMIx namespace (Open MPI 5, PRRTE, Slurm's PMIx plugin), Open MPI 4's ORTE job id
 * (its job family hashes mpirun's host and pid), a Slurm step (job and step id).
 */
static int launch_key(char *out, size_t n)
{
    const char *ns = getenv("PMIX_NAMESPACE"), *ompi = getenv("OMPI_MCA_ess_base_jobid");
    const char *job = getenv("SLURM_JOB_ID"), *step = getenv("SLURM_STEP_ID");
    uint64_t launch = launch_id_from_env();
    if (launch != 0) {
        snprintf(out, n, "stacklens:%016llx", (unsigned long long)launch);
        return 0;
    }
    if (hydra_launch(out, n) == 0)
        return 0;
    if (ns != NULL && *ns != '\0')
        snprintf(out, n, "pmix:%s", ns);
    else if (ompi != NULL && *ompi != '\0')
        snprintf(out, n, "ompi:%s", ompi);
    else if (job != NULL && *job != '\0' && step != NULL && *step != '\0')
        snprintf(out, n, "slurm:%s.%s", job, step);
    else
        return -1;
    return 0;
}

/*
 * Job and run id of a rank whose world communicator is not the whole launch (a session
 * program's first communicator from another process set): no collective (the other
 * processes may never make one with it), so both are derived from the launch key:
 * run id a hash of the job id and the key, a job id (if the environment has none)
 * "launch-<hash of the key>". Without a key, the run id is drawn here (this process is
 * then a run of its own, and world rank 0 says so).
 */
static void derive_ids(sl_identity *id, const char *job, int world_rank, const char *hostname)
{
    char key[256];
    if (launch_key(key, sizeof key) != 0) {
        if (job != NULL)
            sl_copy_id(id->job_id, sizeof id->job_id, job);
        else
            generate_job_id(id, hostname);
        id->run_id = random_run_id();
        if (world_rank == 0)
            sl_warn("rank 0: the launcher gave no identity of this launch (stacklens run, "
                    "Hydra, PMIx, Open MPI or a Slurm step); the world communicator is not "
                    "the whole launch, so each process is recorded as a run of its own");
        return;
    }
    uint64_t h = sl_hash_bytes(key, strlen(key));
    if (job != NULL) {
        sl_copy_id(id->job_id, sizeof id->job_id, job);
    } else {
        char made[64];
        snprintf(made, sizeof made, "launch-%016llx", (unsigned long long)h);
        sl_copy_id(id->job_id, sizeof id->job_id, made);
    }
    uint64_t run = sl_hash_words2(sl_hash_bytes(id->job_id, sizeof id->job_id), h);
    id->run_id = run != 0 ? run : 1;
}

/* Fills job id, host, pid and command line of this rank. */
void sl_identity_init(sl_identity *id, int world_rank, int whole)
{
    char hostname[256];
    host_and_pid(id, hostname, sizeof hostname);

    const char *job = job_id_from_env();
    memset(id->job_id, 0, sizeof id->job_id);
    if (!whole) {
        derive_ids(id, job, world_rank, hostname);
        finish_identity(id);
        return;
    }
    /* Rank 0 draws the run id (and makes a job id if the environment has none);
     * every rank takes both from one broadcast. */
    struct {
        char job_id[sizeof id->job_id];
        uint64_t run_id;
    } agreed;
    memset(&agreed, 0, sizeof agreed);
    if (job != NULL)
        sl_copy_id(agreed.job_id, sizeof agreed.job_id, job);
    if (world_rank == 0) {
        if (job == NULL) {
            generate_job_id(id, hostname);
            memcpy(agreed.job_id, id->job_id, sizeof agreed.job_id);
        }
        agreed.run_id = random_run_id();
    }
    if (PMPI_Bcast(&agreed, (int)sizeof agreed, MPI_BYTE, 0, sl_core.world_comm) != MPI_SUCCESS)
        sl_warn("rank %d: cannot broadcast the job and run id", world_rank);
    memcpy(id->job_id, agreed.job_id, sizeof id->job_id);
    id->run_id = agreed.run_id;
    finish_identity(id);
}
