/*
 * monitored.c — monitored traffic: what Open MPI's monitoring component counts
 * (see monitored.h for why the counts are taken at its recording call and not
 * through MPI_T).
 */
#define _GNU_SOURCE
#include "monitored.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <mpi.h>

#include "core.h"
#include "interpose.h"
#include "util.h"

/* The monitoring variable, as the hooks leave it for Open MPI to read at MPI_Init. */
#define SL_OMPI_MONITORING "OMPI_MCA_pml_monitoring_enable"

/* STACKLENS_MONITOR_TRAFFIC: 0 off, 1 auto, 2 on. */
static int monitor_mode(void)
{
    const char *v = sl_env(SL_SET_MONITOR_TRAFFIC);
    if (v == NULL || *v == '\0' || strcmp(v, "auto") == 0)
        return 1;
    if (strcmp(v, "on") == 0)
        return 2;
    if (strcmp(v, "off") == 0)
        return 0;
    sl_warn("%s='%.32s' is not auto, on or off; using auto",
            sl_env_name(SL_SET_MONITOR_TRAFFIC), v);
    return 1;
}

static int mode = -1; /* monitor_mode(), read once at sl_monitored_prepare */
#ifdef OPEN_MPI
/* 1 if the component's own recording is kept: its counts can be read (the
 * environment switched it on, or asked for its output at MPI_Finalize). 0 if
 * the hooks switched it on for their own counts only: its recording function
 * is then skipped (its counts are never read; see monitored.h). */
static int keep_component;
#endif

void sl_monitored_prepare(void)
{
    mode = monitor_mode();
#ifdef OPEN_MPI
    /* before MPI_Init: single-threaded so far */
    if (mode == 0)
        return;
    if (getenv(SL_OMPI_MONITORING) != NULL || getenv(SL_OMPI_MONITORING "_output") != NULL
        || getenv("OMPI_MCA_pml_monitoring_filename") != NULL) {
        keep_component = 1;
        setenv(SL_OMPI_MONITORING, "1", 0);
        return;
    }
    setenv(SL_OMPI_MONITORING, "1", 0);
#endif
}

/* The one line of STACKLENS_MONITOR_TRAFFIC=on when nothing can be monitored (rank 0). */
static void unmonitored(int world_rank)
{
    if (mode == 2 && world_rank == 0)
        sl_warn("STACKLENS_MONITOR_TRAFFIC=on but this MPI has no active monitoring component "
                "(Open MPI's pml_monitoring_enable); its traffic is not monitored");
}

#ifdef OPEN_MPI

/* Cumulative counters towards one peer world rank. */
typedef struct sl_monitored_counters {
    uint64_t bytes, msgs;
} sl_monitored_counters;

/* (1 + SL_THREAD_BLOCKS) rows of world_size counters once started (atomic pointer;
 * never freed: the PML may record until the process ends): row 0 shared by threads
 * without a counter block of their own (atomic adds), row 1 + b added to only by
 * the thread holding counter block b (plain stores, as core.h's blocks). Mapped
 * without reserving memory: a thread touches the pages of the peers it sends to. */
static sl_monitored_counters *counters;
static int counted_size;           /* world_size: entries of a row */
static const int *monitor_state;   /* the component's mca_common_monitoring_current_state */
static void (*component_record)(int, size_t, int); /* its own function, if kept */

int sl_monitored_start(int world_rank, int world_size)
{
    if (mode < 0)
        mode = monitor_mode();
    if (mode == 0 || world_size <= 0)
        return 0;
    /* Present and switched on: its library is loaded and says it monitors. */
    const int *enabled = dlsym(RTLD_DEFAULT, "mca_common_monitoring_enabled");
    const int *state = dlsym(RTLD_DEFAULT, "mca_common_monitoring_current_state");
    if (enabled == NULL || state == NULL || *enabled == 0) {
        unmonitored(world_rank);
        return 0;
    }
    size_t bytes = (size_t)(1 + SL_THREAD_BLOCKS) * (size_t)world_size * sizeof *counters;
    void *c = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (c == MAP_FAILED) {
        sl_warn("rank %d: no memory for %d monitored-traffic counters; traffic is not monitored",
                world_rank, world_size);
        return 0;
    }
    if (keep_component)
        component_record = (void (*)(int, size_t, int))dlsym(RTLD_NEXT,
                                                             "mca_common_monitoring_record_pml");
    monitor_state = state;
    counted_size = world_size;
    sl_threads_init();
    __atomic_store_n(&counters, (sl_monitored_counters *)c, __ATOMIC_RELEASE);
    return 1;
}

int sl_monitored_active(void)
{
    return __atomic_load_n(&counters, __ATOMIC_ACQUIRE) != NULL;
}

void sl_monitored_graph_made(MPI_Comm comm)
{
    static int warned;
    int rank = 1;
    if (!sl_monitored_active() || __atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED))
        return;
    if (PMPI_Comm_rank(comm, &rank) == MPI_SUCCESS && rank == 0)
        sl_warn("Open MPI's monitoring component (STACKLENS_MONITOR_TRAFFIC=%s) may crash "
                "(SIGFPE or SIGSEGV) in neighbourhood collectives on this graph communicator, "
                "a fault of Open MPI 4.1; if this program uses them, run it with "
                "STACKLENS_MONITOR_TRAFFIC=off",
                mode == 2 ? "on" : "auto");
}

void sl_monitored_load(int peer, uint64_t *bytes, uint64_t *msgs)
{
    sl_monitored_counters *c = __atomic_load_n(&counters, __ATOMIC_ACQUIRE);
    *bytes = *msgs = 0;
    if (c == NULL)
        return;
    unsigned rows = 1 + sl_thread_blocks_used();
    for (unsigned r = 0; r < rows; r++) {
        const sl_monitored_counters *w = &c[(size_t)r * (size_t)counted_size + (size_t)peer];
        *bytes += __atomic_load_n(&w->bytes, __ATOMIC_RELAXED);
        *msgs += __atomic_load_n(&w->msgs, __ATOMIC_RELAXED);
    }
}

/* Adds one message of data_size bytes to world_rank (< counted_size) in row. */
static inline void monitored_add(sl_monitored_counters *c, int row, int world_rank, size_t data_size)
{
    sl_monitored_counters *w = &c[(size_t)row * (size_t)counted_size + (size_t)world_rank];
    if (row != 0) {
        sl_own_add(&w->bytes, (uint64_t)data_size);
        sl_own_add(&w->msgs, 1);
    } else {
        __atomic_fetch_add(&w->bytes, (uint64_t)data_size, __ATOMIC_RELAXED);
        __atomic_fetch_add(&w->msgs, 1, __ATOMIC_RELAXED);
    }
}

/* The recording call's other cases: not counting (yet), a thread's first message,
 * the component's own recording kept. */
static __attribute__((noinline)) void record_pml_slow(int world_rank, size_t data_size,
                                                      int tag)
{
    sl_monitored_counters *c = __atomic_load_n(&counters, __ATOMIC_ACQUIRE);
    if (c != NULL && world_rank >= 0 && world_rank < counted_size
        && __atomic_load_n(monitor_state, __ATOMIC_RELAXED) != 0) {
        if (sl_tls_calls == NULL)
            sl_thread_claim();
        monitored_add(c, sl_tls_block, world_rank, data_size);
        if (component_record != NULL)
            component_record(world_rank, data_size, tag);
        return;
    }
    static void *next_cache;
    void (*next)(int, size_t, int) =
        (void (*)(int, size_t, int))sl_next_fn(&next_cache, "mca_common_monitoring_record_pml");
    if (next != NULL)
        next(world_rank, data_size, tag);
}

/* The component's recording call, made by its PML for every message sent (on any
 * thread): counted here when the component counts it, then passed on if its own
 * counts are kept. Inline: a thread with a counter block, the component's own
 * recording skipped. */
SL_EXPORT void mca_common_monitoring_record_pml(int world_rank, size_t data_size, int tag);

SL_EXPORT void mca_common_monitoring_record_pml(int world_rank, size_t data_size, int tag)
{
    sl_monitored_counters *c = __atomic_load_n(&counters, __ATOMIC_ACQUIRE);
    int row = sl_tls_block;
    if (__builtin_expect(c != NULL && row != 0 && component_record == NULL, 1)
        && (unsigned)world_rank < (unsigned)counted_size
        && __atomic_load_n(monitor_state, __ATOMIC_RELAXED) != 0) {
        monitored_add(c, row, world_rank, data_size);
        return;
    }
    record_pml_slow(world_rank, data_size, tag);
}

#else /* MPICH and others: nothing is monitored, the frames carry no monitored section */

int sl_monitored_start(int world_rank, int world_size)
{
    (void)world_size;
    if (mode < 0)
        mode = monitor_mode();
    unmonitored(world_rank);
    return 0;
}

int sl_monitored_active(void)
{
    return 0;
}

void sl_monitored_load(int peer, uint64_t *bytes, uint64_t *msgs)
{
    (void)peer;
    *bytes = *msgs = 0;
}

void sl_monitored_graph_made(MPI_Comm comm)
{
    (void)comm;
}

#endif
