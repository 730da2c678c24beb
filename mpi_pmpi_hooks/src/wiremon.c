/*
 * wiremon.c — on-wire traffic as Open MPI's monitoring component counts it
 * (see wiremon.h for why the counts are taken at its recording call and not
 * through MPI_T).
 */
#define _GNU_SOURCE
#include "wiremon.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "interpose.h"
#include "util.h"

/* The monitoring variable, as the hooks leave it for Open MPI to read at MPI_Init. */
#define SL_OMPI_MONITORING "OMPI_MCA_pml_monitoring_enable"

/* STACKLENS_MEASURE_WIRE: 0 off, 1 auto, 2 on. */
static int wire_mode(void)
{
    const char *v = sl_env(SL_SET_MEASURE_WIRE);
    if (v == NULL || *v == '\0' || strcmp(v, "auto") == 0)
        return 1;
    if (strcmp(v, "on") == 0)
        return 2;
    if (strcmp(v, "off") == 0)
        return 0;
    sl_warn("STACKLENS_MEASURE_WIRE='%.32s' is not auto, on or off; using auto", v);
    return 1;
}

static int mode = -1; /* wire_mode(), read once at sl_wiremon_prepare */

void sl_wiremon_prepare(void)
{
    mode = wire_mode();
#ifdef OPEN_MPI
    if (mode != 0 && getenv(SL_OMPI_MONITORING) == NULL)
        setenv(SL_OMPI_MONITORING, "1", 0); /* before MPI_Init: single-threaded so far */
#endif
}

/* The one line of STACKLENS_MEASURE_WIRE=on when nothing can be measured (rank 0). */
static void unmeasured(int world_rank)
{
    if (mode == 2 && world_rank == 0)
        sl_warn("STACKLENS_MEASURE_WIRE=on but this MPI has no active monitoring component "
                "(Open MPI's pml_monitoring_enable); on-wire traffic is not measured");
}

#ifdef OPEN_MPI

/* Cumulative counters towards one peer world rank. */
typedef struct sl_wire_counters {
    uint64_t bytes, msgs;
} sl_wire_counters;

static sl_wire_counters *counters; /* world_size entries once started (atomic pointer) */
static int counted_size;           /* entries of counters */
static const int *monitor_state;   /* the component's mca_common_monitoring_current_state */

int sl_wiremon_start(int world_rank, int world_size)
{
    if (mode < 0)
        mode = wire_mode();
    if (mode == 0 || world_size <= 0)
        return 0;
    /* Present and switched on: its library is loaded and says it monitors. */
    const int *enabled = dlsym(RTLD_DEFAULT, "mca_common_monitoring_enabled");
    const int *state = dlsym(RTLD_DEFAULT, "mca_common_monitoring_current_state");
    if (enabled == NULL || state == NULL || *enabled == 0) {
        unmeasured(world_rank);
        return 0;
    }
    sl_wire_counters *c = calloc((size_t)world_size, sizeof *c);
    if (c == NULL) {
        sl_warn("rank %d: no memory for %d on-wire counters; on-wire traffic is not measured",
                world_rank, world_size);
        return 0;
    }
    monitor_state = state;
    counted_size = world_size;
    __atomic_store_n(&counters, c, __ATOMIC_RELEASE);
    return 1;
}

int sl_wiremon_active(void)
{
    return __atomic_load_n(&counters, __ATOMIC_ACQUIRE) != NULL;
}

void sl_wiremon_load(int peer, uint64_t *bytes, uint64_t *msgs)
{
    sl_wire_counters *c = __atomic_load_n(&counters, __ATOMIC_ACQUIRE);
    *bytes = c != NULL ? __atomic_load_n(&c[peer].bytes, __ATOMIC_RELAXED) : 0;
    *msgs = c != NULL ? __atomic_load_n(&c[peer].msgs, __ATOMIC_RELAXED) : 0;
}

/* The component's recording call, made by its PML for every message sent (on any
 * thread): counted here when the component counts it, then passed on. */
SL_EXPORT void mca_common_monitoring_record_pml(int world_rank, size_t data_size, int tag);

SL_EXPORT void mca_common_monitoring_record_pml(int world_rank, size_t data_size, int tag)
{
    static void *next_cache;
    void (*next)(int, size_t, int) =
        (void (*)(int, size_t, int))sl_next_fn(&next_cache, "mca_common_monitoring_record_pml");
    sl_wire_counters *c = __atomic_load_n(&counters, __ATOMIC_ACQUIRE);
    if (c != NULL && world_rank >= 0 && world_rank < counted_size
        && __atomic_load_n(monitor_state, __ATOMIC_RELAXED) != 0) {
        __atomic_fetch_add(&c[world_rank].bytes, (uint64_t)data_size, __ATOMIC_RELAXED);
        __atomic_fetch_add(&c[world_rank].msgs, 1, __ATOMIC_RELAXED);
    }
    if (next != NULL)
        next(world_rank, data_size, tag);
}

#else /* MPICH and others: nothing is measured, the frames carry no wire section */

int sl_wiremon_start(int world_rank, int world_size)
{
    (void)world_size;
    if (mode < 0)
        mode = wire_mode();
    unmeasured(world_rank);
    return 0;
}

int sl_wiremon_active(void)
{
    return 0;
}

void sl_wiremon_load(int peer, uint64_t *bytes, uint64_t *msgs)
{
    (void)peer;
    *bytes = *msgs = 0;
}

#endif
