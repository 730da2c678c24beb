/*
 * lifecycle.c — brings libstacklens up and down (see lifecycle.h).
 */
#define _GNU_SOURCE /* program_invocation_short_name */
#include "lifecycle.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "family.h"
#include "fdtable.h"
#include "ibport.h"
#include "identity.h"
#include "interpose.h"
#include "io.h"
#include "mpimatch.h"
#include "pyframe.h"
#include "requests.h"
#include "sender.h"
#include "monitored.h"

static sl_config config;
static sl_identity identity;
static pid_t started_pid;  /* the process that started the sender, 0 if none */
static int launcher;       /* this process is an MPI launcher: nothing is done */
static int mpi_rank;       /* counting started in MPI_Init* or a session (not standalone) */
static int finalized;      /* MPI_Finalize was called (sessions may still be open) */
static int open_sessions;  /* atomic: sessions initialised and not yet finalized */
static int session_world;  /* the world is a session's communicator (freed at the end) */
/* The calls of session functions made before counting starts (the session's first
 * communicator starts it): counted then. Only the session wrappers write them. */
static sl_op_counters pending_ops[SL_OP_COUNT];
static pthread_mutex_t pending_lock = PTHREAD_MUTEX_INITIALIZER;
static int standalone;     /* atomic: 0 not tried, 1 claimed (standalone or MPI) */
static void (*next_exit)(int); /* libc's _exit, found at load (dlsym is not signal-safe) */

/* True if the program is an MPI launcher or daemon. */
static int is_launcher(void)
{
    static const char *const names[] = { "mpirun", "mpiexec", "orterun", "orted", "prterun",
                                         "prted", "prte", "hydra_pmi_proxy", "hydra_nameserver" };
    const char *me = program_invocation_short_name;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strncmp(me, names[i], strlen(names[i])) == 0)
            return 1;
    return 0;
}

/* True if an MPI launcher started this process (it is expected to call MPI_Init). */
static int launched_by_mpi(void)
{
    static const char *const vars[] = { "OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK",
                                        "PMI_SIZE" };
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        if (getenv(vars[i]) != NULL)
            return 1;
    return 0;
}

/* In a forked child: the parent's sender is not here, so nothing is counted. */
static void forked_child(void)
{
    __atomic_store_n(&sl_core.ready, 0, __ATOMIC_RELAXED);
    memset(sl_io_enabled, 0, sizeof sl_io_enabled);
}

/* Library constructor: the tick clock, configuration and the I/O table. */
__attribute__((constructor)) static void sl_at_load(void)
{
    int saved = errno;
    sl_ticks_init();
    identity.proc_start_ns = sl_real_ns(); /* this process image's key, with host and pid */
    next_exit = (void (*)(int))dlsym(RTLD_NEXT, "_exit");
    launcher = is_launcher();
    if (launcher)
        sl_identity_launcher_id(); /* before it starts anything: its ranks inherit it */
    if (!launcher) {
        sl_config_load(&config);
        if (sl_io_init(config.max_keys, config.disable_io, launched_by_mpi()) != 0)
            sl_warn("no memory for the I/O table; file-system I/O is not counted");
        if (sl_site_init(config.callsite_depth, config.max_callsites) != 0)
            sl_warn("no memory for the call-site tables; call sites are not kept");
        pthread_atfork(NULL, NULL, forked_child);
    }
    errno = saved;
}

/*
 * Handler of SIGTERM and, in MPI ranks, SIGINT (installed only where the
 * application has none): the sender thread delivers the last interval
 * (async-signal-safe request and bounded wait, see
 * sl_sender_flush_from_signal), then the default action is restored and the
 * signal raised again, so the process still dies of it. In a forked child
 * (no sender) it only re-raises.
 */
static void on_term_signal(int sig)
{
    int saved = errno;
    if (started_pid == getpid())
        sl_sender_flush_from_signal();
    struct sigaction dfl = { .sa_handler = SIG_DFL };
    sigemptyset(&dfl.sa_mask);
    sigaction(sig, &dfl, NULL);
    raise(sig); /* blocked while the handler runs: delivered when it returns */
    errno = saved;
}

/*
 * The signals whose last interval is flushed, and whether our handler is
 * installed for each. SIGINT only in MPI ranks, whose runtime is up by then:
 * a standalone program starts counting at its first file I/O, which may come
 * before its runtime looks at SIGINT (CPython installs its KeyboardInterrupt
 * handler only if SIGINT still has its default action, after it has read its
 * encodings package from disk).
 */
static const int term_signals[] = { SIGTERM, SIGINT };
static int term_armed[sizeof term_signals / sizeof term_signals[0]];

/* Installs on_term_signal for the first n term_signals that have their default action. */
static void arm_term_signals(size_t n)
{
    for (size_t i = 0; i < n; i++) {
        struct sigaction cur, sa = { .sa_handler = on_term_signal, .sa_flags = SA_RESTART };
        sigemptyset(&sa.sa_mask);
        if (sigaction(term_signals[i], NULL, &cur) != 0 || (cur.sa_flags & SA_SIGINFO)
            || cur.sa_handler != SIG_DFL)
            continue; /* the application (or its runtime) handles it itself */
        term_armed[i] = sigaction(term_signals[i], &sa, NULL) == 0;
    }
}

/* Restores the default action where our handler is still the installed one. */
static void disarm_term_signals(void)
{
    struct sigaction cur, dfl = { .sa_handler = SIG_DFL };
    sigemptyset(&dfl.sa_mask);
    for (size_t i = 0; i < sizeof term_signals / sizeof term_signals[0]; i++) {
        if (term_armed[i] && sigaction(term_signals[i], NULL, &cur) == 0
            && !(cur.sa_flags & SA_SIGINFO) && cur.sa_handler == on_term_signal)
            sigaction(term_signals[i], &dfl, NULL);
        term_armed[i] = 0;
    }
}

/* Starts timing PMPI_Init* with the thread marked inside MPI. */
int sl_init_begin(sl_call *call, const void *site)
{
    if (sl_tls_in_call)
        return 0;
    sl_tls_in_call = 1; /* calls and I/O of the MPI library's own init are not counted */
    if (!launcher && !config.disable_mpi)
        sl_monitored_prepare(); /* Open MPI reads its monitoring switch inside PMPI_Init */
    call->site = site;
    call->comm = (uint32_t)SL_BOUND_no_comm;
    call->t0 = sl_ticks();
    return 1;
}

/*
 * Brings up identity, tables and sender on the world `world` (MPI_COMM_WORLD, or a
 * session's) after a successful PMPI_Init* or the first communicator of a session;
 * the call (of op, timed by call) is counted. group: the processes of the launch, whose
 * ranks are the world ranks (MPI_GROUP_NULL: world's group), taken over (freed on
 * failure); whole: world holds all of them (else nothing collective is done on it but
 * what the program's own call just did). Returns 1 if counting is on.
 */
static int start_mpi(sl_call *call, int op, int rc, MPI_Comm world, MPI_Group group, int whole)
{
    sl_io_startup_end(); /* the program's own I/O from here on */
    int rank = MPI_UNDEFINED, size = 0;
    int claimed = __atomic_exchange_n(&standalone, 1, __ATOMIC_ACQ_REL);
    if (rc != MPI_SUCCESS || launcher || config.disable_mpi || claimed
        || sl_mpi_mismatch /* a library built for the other MPI: stay off */
        || (group == MPI_GROUP_NULL && PMPI_Comm_group(world, &group) != MPI_SUCCESS)
        || PMPI_Group_rank(group, &rank) != MPI_SUCCESS || rank == MPI_UNDEFINED
        || PMPI_Group_size(group, &size) != MPI_SUCCESS) {
        if (group != MPI_GROUP_NULL)
            PMPI_Group_free(&group);
        return 0;
    }
    sl_core.world_comm = world;
    sl_core.world_group = group; /* sl_core_init's, freed by it on failure */
    /* Before the first message of the hooks' own (the identity broadcast), so the
     * monitored counts match the monitoring component's from here on. */
    sl_monitored_start(rank, size);
    /* Collective when whole: done before anything that could fail on one rank only,
     * so that every rank takes part. */
    sl_identity_init(&identity, rank, whole);
    sl_ibport_init(identity.host, whole); /* collective too when whole */
    if (sl_core_init(config.max_keys) != 0)
        return 0;
    if (sl_requests_init() != 0) {
        sl_core_fini();
        return 0;
    }
    if (sl_site_depth != 0)
        sl_py_init(config.max_callsites); /* mpi4py's calls at their Python lines */
    pthread_mutex_lock(&pending_lock); /* session calls made before (sessions below) */
    for (int i = 0; i < SL_OP_COUNT; i++)
        sl_core.calls.ops[i] = pending_ops[i];
    pthread_mutex_unlock(&pending_lock);
    sl_core.calls.ops[op].calls += 1;
    sl_core.calls.ops[op].ticks += sl_call_ticks(call);
    sl_site_count(call->site, SL_SITE_MPI, (unsigned)op, call->comm, 0, sl_call_ticks(call));
    if (sl_sender_start(&config, &identity) != 0) {
        sl_requests_fini();
        sl_core_fini();
        return 0;
    }
    started_pid = getpid();
    mpi_rank = 1;
    arm_term_signals(2); /* SIGTERM and SIGINT */
    __atomic_store_n(&sl_core.ready, 1, __ATOMIC_RELEASE);
    return 1;
}

/* Brings up identity, tables and sender after a successful PMPI_Init*. */
void sl_init_end(sl_call *call, int op, int rc)
{
    sl_mark_end(call);
    start_mpi(call, op, rc, MPI_COMM_WORLD, MPI_GROUP_NULL, 1);
    sl_tls_in_call = 0;
}

/* Standalone job: rank 0 of 1, started at the first file-system I/O. */
void sl_standalone_start(void)
{
    if (__atomic_load_n(&standalone, __ATOMIC_RELAXED) || launcher || config.disable_processes
        || launched_by_mpi() || __atomic_exchange_n(&standalone, 1, __ATOMIC_ACQ_REL))
        return;
    int saved = sl_tls_in_call;
    sl_tls_in_call = 1;
    sl_core.world_rank = 0;
    sl_core.world_size = 1;
    sl_core.peers = calloc(1, sizeof *sl_core.peers);
    sl_core.rma = calloc(SL_RMA_COUNT > 0 ? SL_RMA_COUNT : 1, sizeof *sl_core.rma);
    sl_identity_init_standalone(&identity);
    if (sl_core.peers != NULL && sl_core.rma != NULL
        && sl_sender_start(&config, &identity) == 0) {
        started_pid = getpid();
        arm_term_signals(1); /* SIGTERM only (see term_signals) */
    }
    sl_tls_in_call = saved;
}

/*
 * Turns counting off and stops the sender after its final frame of
 * frame_type (errorcode: MPI_Abort's). Returns 1 if the tables may now be
 * freed (the sender thread has ended; its builder is then released), else 0.
 */
static int stop_counting(unsigned frame_type, int32_t errorcode)
{
    if (started_pid == 0 || started_pid != getpid())
        return 0; /* never started, already stopped, or a forked child */
    disarm_term_signals();
    started_pid = 0;
    __atomic_store_n(&sl_core.ready, 0, __ATOMIC_RELEASE);
    if (!sl_sender_end(frame_type, errorcode))
        return 0;
    sl_sender_release();
    return 1;
}

#if MPI_VERSION >= 4
/* The hooks' own session in a session program, opened at its first communicator to read
 * the mpi://WORLD process set (a local query, no communication: the MPI is already up by
 * the program's session), finalized before the program's last session is. */
static MPI_Session own_session = MPI_SESSION_NULL;

/* Finalizes own_session if open (the program's session keeps MPI up: nothing is
 * exchanged). */
static void close_own_session(void)
{
    if (own_session != MPI_SESSION_NULL)
        PMPI_Session_finalize(&own_session);
    own_session = MPI_SESSION_NULL;
}
#endif

/* Final frame, sender stop, tables freed (and a session's world communicator, and the
 * hooks' own session). */
static void stop_and_free(void)
{
    if (stop_counting(SL_FRAME_final, 0)) {
        sl_requests_fini();
        sl_core_fini();
        if (session_world)
            PMPI_Comm_free(&sl_core.world_comm);
        session_world = 0;
    }
#if MPI_VERSION >= 4
    close_own_session();
#endif
}

/* MPI_Finalize: counts the call, final frame, sender stop, tables freed. */
int sl_finalize_begin(int op, const void *site)
{
    sl_call call;
    if (sl_tls_in_call)
        return 0;
    if (sl_enter(&call, site)) {
        sl_mark_end(&call);
        sl_leave(&call, op, 0);
        sl_tls_in_call = 1;
        finalized = 1;
        /* Sessions still open go on counting: the final frame comes at the last
         * MPI_Session_finalize, or at exit. */
        if (__atomic_load_n(&open_sessions, __ATOMIC_ACQUIRE) == 0)
            stop_and_free();
    }
    sl_tls_in_call = 1;
    return 1;
}

/* The thread leaves MPI_Finalize. */
void sl_finalize_end(int outer)
{
    if (outer)
        sl_tls_in_call = 0;
}

/* Times a session wrapper's call (sl_session_end counts it). Returns 0 if nested. */
int sl_session_begin(sl_call *call, const void *site)
{
    if (sl_tls_in_call)
        return 0;
    sl_tls_in_call = 1;
    call->site = site;
    call->comm = (uint32_t)SL_BOUND_no_comm;
    call->t0 = sl_ticks();
    return 1;
}

/* Counts a session call of op: at once while counting, else when counting starts. */
static void count_session_call(sl_call *call, int op)
{
    uint64_t ticks = sl_call_ticks(call);
    sl_site_count(call->site, SL_SITE_MPI, (unsigned)op, call->comm, 0, ticks);
    pthread_mutex_lock(&pending_lock);
    if (__atomic_load_n(&sl_core.ready, __ATOMIC_ACQUIRE)) {
        __atomic_fetch_add(&sl_core.calls.ops[op].calls, 1, __ATOMIC_RELAXED);
        __atomic_fetch_add(&sl_core.calls.ops[op].ticks, ticks, __ATOMIC_RELAXED);
    } else {
        pending_ops[op].calls++;
        pending_ops[op].ticks += ticks;
    }
    pthread_mutex_unlock(&pending_lock);
}

/* After a session call of op (opens: MPI_Session_init, which opened one if rc says so). */
void sl_session_end(sl_call *call, int op, int rc, int opens)
{
    sl_mark_end(call);
    if (opens && rc == MPI_SUCCESS)
        __atomic_add_fetch(&open_sessions, 1, __ATOMIC_ACQ_REL);
    count_session_call(call, op);
    sl_tls_in_call = 0;
}

#if MPI_VERSION >= 4
/*
 * The group of the mpi://WORLD process set (into *world: its ranks are the world ranks)
 * from the hooks' own session, and whether first's group is that group (*whole). Local
 * calls only. 0, or -1 (nothing to free).
 */
static int session_world_group(MPI_Comm first, MPI_Group *world, int *whole)
{
    MPI_Group mine;
    int same = MPI_UNEQUAL;
    if (own_session == MPI_SESSION_NULL
        && PMPI_Session_init(MPI_INFO_NULL, MPI_ERRORS_RETURN, &own_session) != MPI_SUCCESS) {
        own_session = MPI_SESSION_NULL;
        return -1;
    }
    if (PMPI_Group_from_session_pset(own_session, "mpi://WORLD", world) != MPI_SUCCESS) {
        close_own_session();
        return -1;
    }
    if (PMPI_Comm_group(first, &mine) == MPI_SUCCESS) {
        PMPI_Group_compare(mine, *world, &same);
        PMPI_Group_free(&mine);
    }
    *whole = same == MPI_IDENT;
    return 0;
}
#endif

/*
 * After MPI_Comm_create_from_group made newcomm (rc): newcomm is described (its family,
 * family.h) while counting; the first one of a process
 * without MPI_Init starts counting, with a duplicate of newcomm as the world
 * communicator (the duplicate is collective over the same group as the call itself)
 * and the mpi://WORLD process set's group for the world ranks and size, whatever the
 * process set newcomm is over (mpi://SELF, a subgroup). When newcomm is not over all of
 * mpi://WORLD, nothing collective is done on it (identity.h: the run id from the launch).
 */
void sl_session_comm_end(sl_call *call, int op, int rc, MPI_Comm newcomm)
{
    sl_mark_end(call);
#if MPI_VERSION >= 4
    MPI_Comm world;
    MPI_Group group;
    int whole = 0;
    if (rc == MPI_SUCCESS && !__atomic_load_n(&standalone, __ATOMIC_ACQUIRE) && !launcher
        && !config.disable_mpi && session_world_group(newcomm, &group, &whole) == 0) {
        if (PMPI_Comm_dup(newcomm, &world) != MPI_SUCCESS) {
            PMPI_Group_free(&group);
        } else if (start_mpi(call, op, rc, world, group, whole)) {
            session_world = 1;
            sl_family_from_group(newcomm, call->site);
            sl_tls_in_call = 0;
            return;
        } else {
            PMPI_Comm_free(&world);
        }
        close_own_session();
    }
#else
    (void)rc;
    (void)newcomm; /* no sessions before MPI 4: never called */
#endif
    count_session_call(call, op);
    if (rc == MPI_SUCCESS && __atomic_load_n(&sl_core.ready, __ATOMIC_ACQUIRE))
        sl_family_from_group(newcomm, call->site); /* counting: its family */
    sl_tls_in_call = 0;
}

/* MPI_Session_finalize: counts the call; the last open session ends counting (final
 * frame, tables freed) when a session started it or MPI_Finalize came before. */
int sl_session_finalize_begin(int op, const void *site)
{
    sl_call call;
    if (!sl_session_begin(&call, site))
        return 0;
    sl_mark_end(&call);
    count_session_call(&call, op);
    if (__atomic_sub_fetch(&open_sessions, 1, __ATOMIC_ACQ_REL) <= 0
        && (session_world || finalized))
        stop_and_free();
    return 1; /* the thread stays marked inside MPI until sl_finalize_end */
}

/* MPI_Abort: counts the call, then the final frame of type aborted with the
 * error code, delivered (bounded) before PMPI_Abort ends the job. Nothing is
 * freed: the process is about to end, other threads may be in wrappers. */
void sl_abort_begin(int op, int errorcode, const void *site)
{
    sl_call call;
    if (!sl_enter(&call, site))
        return;
    sl_mark_end(&call);
    sl_leave(&call, op, 0);
    sl_tls_in_call = 1;
    stop_counting(SL_FRAME_aborted, errorcode);
}

/* Before an exec: the sender delivers the interval so far as a final frame
 * (the image is about to be replaced). Returns 1 if it did and is stopped. */
int sl_exec_begin(void)
{
    if (started_pid == 0 || started_pid != getpid() || sl_tls_fdtable_private)
        return 0;
    int saved = sl_tls_in_call;
    sl_tls_in_call = 1;
    int ended = sl_sender_end(SL_FRAME_final, 0);
    sl_tls_in_call = saved;
    return ended;
}

/* After an exec that failed (began = sl_exec_begin's result): counting goes on. */
void sl_exec_failed(int began)
{
    if (began && sl_sender_restart() != 0)
        __atomic_store_n(&sl_core.ready, 0, __ATOMIC_RELEASE);
}

/*
 * How long an MPI rank that ends without MPI_Finalize waits after its final
 * frame before the process really ends. MPICH's Hydra SIGKILLs every other
 * rank's process group as soon as one rank's process ends without having
 * finalized: a rank a little behind (its own return from main, its final
 * frame in flight) was killed before its exit path ran, and lost whole.
 * This grace gives the others time to deliver theirs; a rank killed anyway
 * loses what it counted since its last frame (no per-rank snapshot yet).
 */
#define SL_EXIT_GRACE_NS 1000000000L /* 1 s: 250 ms lost ranks on a loaded 2-core node */

/* The final frame's type at process end: exited for an MPI rank (it did not finalize). */
static unsigned exit_frame_type(void)
{
    return mpi_rank && !finalized ? SL_FRAME_exited : SL_FRAME_final;
}

/* An MPI rank of several ending without MPI_Finalize: the grace above (async-signal-safe). */
static void exit_grace(void)
{
    if (exit_frame_type() != SL_FRAME_exited || sl_core.world_size < 2)
        return;
    struct timespec left = { SL_EXIT_GRACE_NS / 1000000000L, SL_EXIT_GRACE_NS % 1000000000L };
    while (nanosleep(&left, &left) != 0 && errno == EINTR)
        ;
}

/*
 * Process exit without MPI_Finalize (or a standalone job): deliver the final
 * frame all the same (of type exited for an MPI rank, so the run says it did
 * not finalize). The tables are left to the exiting process: other threads
 * may still be inside a wrapper, and MPI may no longer be usable.
 */
__attribute__((destructor)) static void sl_at_exit(void)
{
    sl_tls_in_call = 1;
    int was_counting = started_pid != 0 && started_pid == getpid();
    stop_counting(exit_frame_type(), 0);
    if (was_counting)
        exit_grace();
}

/*
 * _exit and _Exit end a process without its destructors (dash ends every
 * script that way): the final frame is delivered here, by the
 * async-signal-safe flush (they may be called from a signal handler), and
 * only in the process that started the sender (a forked or vforked child has
 * none; exit() reaches libc's _exit internally, after the destructor).
 */
static _Noreturn void exit_now(int status)
{
    if (started_pid != 0 && started_pid == getpid()) {
        started_pid = 0;
        __atomic_store_n(&sl_core.ready, 0, __ATOMIC_RELEASE);
        sl_sender_flush_at_exit(exit_frame_type());
        exit_grace();
    }
    if (next_exit != NULL)
        next_exit(status);
    for (;;)
        syscall(SYS_exit_group, status);
}

SL_EXPORT void _exit(int status)
{
    exit_now(status);
}

SL_EXPORT void _Exit(int status)
{
    exit_now(status);
}
