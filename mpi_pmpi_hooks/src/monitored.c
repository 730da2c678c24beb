/*
 * monitored.c — monitored traffic: what Open MPI's monitoring component counts
 * (see monitored.h for why the counts are taken at its recording call and not
 * through MPI_T).
 */
#define _GNU_SOURCE
#include "monitored.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <mpi.h>

#include "core.h"
#include "interpose.h"
#include "util.h"

/* The monitoring variable, as the hooks leave it for Open MPI to read at MPI_Init. */
#define SL_OMPI_MONITORING "OMPI_MCA_pml_monitoring_enable"

/* OPAL_ERR_NOT_FOUND (opal/include/opal/constants.h), what a lookup of a key not in an
 * opal_hash_table answers. */
#define SL_OPAL_ERR_NOT_FOUND (-13)

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

#ifdef OPEN_MPI
/* Where this Open MPI keeps its system MCA parameter file (compiled in from
 * `ompi_info --path sysconfdir`; OPAL_SYSCONFDIR moves it, as it moves Open MPI's). */
#ifndef SL_OMPI_SYSCONFDIR
#define SL_OMPI_SYSCONFDIR "/etc/openmpi"
#endif

/* Copies into out (cap bytes) the value `name` has in the MCA parameter file path
 * (`name = value` lines, '#' comments; a value longer than out is not taken).
 * Returns 1 if the file sets it. */
static int param_file_value(const char *path, const char *name, char *out, size_t cap)
{
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return 0;
    char line[512];
    size_t n = strlen(name);
    int found = 0;
    while (!found && fgets(line, sizeof line, f) != NULL) {
        char *p = line;
        while (*p == ' ' || *p == '\t')
            p++;
        if (strncmp(p, name, n) != 0)
            continue;
        p += n;
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p++ != '=')
            continue;
        while (*p == ' ' || *p == '\t')
            p++;
        size_t len = strcspn(p, "#\r\n");
        while (len > 0 && (p[len - 1] == ' ' || p[len - 1] == '\t'))
            len--;
        if (len >= 2 && ((p[0] == '"' && p[len - 1] == '"') || (p[0] == '\'' && p[len - 1] == '\''))) {
            p++;
            len -= 2;
        }
        if (len < cap) {
            memcpy(out, p, len);
            out[len] = '\0';
            found = 1;
        }
    }
    fclose(f);
    return found;
}

/* The value Open MPI would give the framework list `name` (e.g. "coll") from its
 * parameter files, as it reads them: the files of OMPI_MCA_mca_base_param_files
 * (comma-separated, "none" for none), else ~/.openmpi/mca-params.conf then the system
 * file; the first that sets it wins. Returns 1 if one does. */
static int param_files_value(const char *name, char *out, size_t cap)
{
    char list[1024];
    const char *files = getenv("OMPI_MCA_mca_base_param_files");
    if (files != NULL && strcmp(files, "none") == 0)
        return 0;
    if (files == NULL) {
        const char *home = getenv("HOME");
        const char *sysconf = getenv("OPAL_SYSCONFDIR");
        if (sysconf == NULL || *sysconf == '\0')
            sysconf = SL_OMPI_SYSCONFDIR;
        snprintf(list, sizeof list, "%s/.openmpi/mca-params.conf,%s/openmpi-mca-params.conf",
                 home != NULL ? home : "", sysconf);
    } else {
        snprintf(list, sizeof list, "%s", files);
    }
    for (char *save = NULL, *path = strtok_r(list, ",", &save); path != NULL;
         path = strtok_r(NULL, ",", &save))
        if (param_file_value(path, name, out, cap))
            return 1;
    return 0;
}

/* 1 if the comma-separated component list names component. */
static int list_names(const char *list, const char *component)
{
    size_t n = strlen(component);
    for (const char *p = list; *p != '\0'; p += strcspn(p, ","), p += (*p == ',')) {
        if (strncmp(p, component, n) == 0 && (p[n] == ',' || p[n] == '\0'))
            return 1;
    }
    return 0;
}

/* Keeps Open MPI's coll/monitoring component out of a run whose monitoring the hooks
 * switched on (see monitored.h, "Which component"): the coll selection the job has (the
 * environment's OMPI_MCA_coll, else its parameter files'), with monitoring excluded. An
 * exclusion list gets ",monitoring" added; an inclusion list is left as it is (it names
 * coll/monitoring only if the job asked for it); none becomes "^monitoring". */
static void exclude_coll_monitoring(void)
{
    char value[512];
    const char *coll = getenv("OMPI_MCA_coll");
    if (coll == NULL && param_files_value("coll", value, sizeof value))
        coll = value;
    if (coll == NULL || *coll == '\0') {
        setenv("OMPI_MCA_coll", "^monitoring", 1);
        return;
    }
    if (coll[0] != '^' || list_names(coll + 1, "monitoring"))
        return;
    char merged[600];
    if (snprintf(merged, sizeof merged, "%s,monitoring", coll) < (int)sizeof merged)
        setenv("OMPI_MCA_coll", merged, 1);
}
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
        /* the job's own monitoring: as it asked, coll/monitoring's fault included */
        keep_component = 1;
        setenv(SL_OMPI_MONITORING, "1", 0);
        return;
    }
    exclude_coll_monitoring();
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

/* 1 once coll/monitoring has made its table of communicators (its first module
 * enabled): mca_common_monitoring_coll_new has been called. */
static int coll_table_made;

void sl_monitored_graph_made(MPI_Comm comm)
{
    static int warned;
    int rank = 1;
    if (!__atomic_load_n(&coll_table_made, __ATOMIC_ACQUIRE)
        || __atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED))
        return;
    if (PMPI_Comm_rank(comm, &rank) == MPI_SUCCESS && rank == 0)
        sl_warn("this job switched on Open MPI's monitoring (pml_monitoring_enable) and with "
                "it coll/monitoring, which crashes (SIGFPE or SIGSEGV) in neighbourhood "
                "collectives on this graph communicator, a fault of Open MPI 4.1 with or "
                "without stacklens; OMPI_MCA_coll=^monitoring keeps it out");
}

/* coll/monitoring's call as it enables its module on a communicator (the first makes
 * its table): noted, then passed on. */
SL_EXPORT void *mca_common_monitoring_coll_new(void *comm);

SL_EXPORT void *mca_common_monitoring_coll_new(void *comm)
{
    static void *next_cache;
    void *(*next)(void *) = (void *(*)(void *))sl_next_fn(&next_cache,
                                                          "mca_common_monitoring_coll_new");
    if (next == NULL)
        return NULL;
    void *data = next(comm);
    __atomic_store_n(&coll_table_made, 1, __ATOMIC_RELEASE);
    return data;
}

/* pml/monitoring's call as a communicator is freed (MPI_Comm_free, MPI_Finalize): it
 * looks the communicator up in coll/monitoring's table, which does not exist while
 * coll/monitoring is out (a NULL table: SIGSEGV in opal_hash_table_get_value_uint64).
 * Passed on only once the table exists; else the communicator is not in it. */
SL_EXPORT int mca_common_monitoring_coll_cache_name(void *comm);

SL_EXPORT int mca_common_monitoring_coll_cache_name(void *comm)
{
    static void *next_cache;
    if (!__atomic_load_n(&coll_table_made, __ATOMIC_ACQUIRE))
        return SL_OPAL_ERR_NOT_FOUND;
    int (*next)(void *) = (int (*)(void *))sl_next_fn(&next_cache,
                                                      "mca_common_monitoring_coll_cache_name");
    return next != NULL ? next(comm) : SL_OPAL_ERR_NOT_FOUND;
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
