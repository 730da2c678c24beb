/*
 * core.c — per-rank counter tables and the counting done on the MPI call
 * path (see core.h). Only relaxed atomic adds happen here while the
 * application runs; allocation is done once at init.
 */
#include "core.h"

#include <stdlib.h>
#include <string.h>

sl_core_state sl_core;
__thread int sl_tls_in_call;

/* Queries MPI_COMM_WORLD and allocates the per-peer table. */
int sl_core_init(void)
{
    if (PMPI_Comm_rank(MPI_COMM_WORLD, &sl_core.world_rank) != MPI_SUCCESS
        || PMPI_Comm_size(MPI_COMM_WORLD, &sl_core.world_size) != MPI_SUCCESS
        || sl_core.world_size <= 0) {
        sl_warn("cannot query MPI_COMM_WORLD; stacklens is off");
        return -1;
    }
    sl_core.peers = calloc((size_t)sl_core.world_size, sizeof *sl_core.peers);
    if (sl_core.peers == NULL) {
        sl_warn("rank %d: no memory for %d peer counters; stacklens is off",
                sl_core.world_rank, sl_core.world_size);
        return -1;
    }
    if (PMPI_Comm_group(MPI_COMM_WORLD, &sl_core.world_group) != MPI_SUCCESS) {
        sl_warn("rank %d: cannot get the group of MPI_COMM_WORLD; stacklens is off",
                sl_core.world_rank);
        free(sl_core.peers);
        sl_core.peers = NULL;
        return -1;
    }
    memset(sl_core.ops, 0, sizeof sl_core.ops);
    return 0;
}

/* Frees the per-peer table and the world group. */
void sl_core_fini(void)
{
    free(sl_core.peers);
    sl_core.peers = NULL;
    PMPI_Group_free(&sl_core.world_group);
}

/* count x PMPI_Type_size(datatype), 0 when nothing is transferred. */
uint64_t sl_type_bytes(int64_t count, MPI_Datatype datatype)
{
    int size;
    if (count <= 0 || datatype == MPI_DATATYPE_NULL
        || PMPI_Type_size(datatype, &size) != MPI_SUCCESS || size <= 0)
        return 0;
    return (uint64_t)count * (uint64_t)size;
}

/* Translates rank of comm to MPI_COMM_WORLD: fast path for the world itself. */
int sl_world_rank(MPI_Comm comm, int rank)
{
    if (rank < 0) /* MPI_PROC_NULL, MPI_ANY_SOURCE, MPI_ROOT are negative */
        return -1;
    if (comm == MPI_COMM_WORLD)
        return rank < sl_core.world_size ? rank : -1;

    /* Correct but not cached: one group lookup per call on other comms. */
    int inter = 0, world = MPI_UNDEFINED;
    MPI_Group group;
    if (PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS)
        return -1;
    int rc = inter ? PMPI_Comm_remote_group(comm, &group) : PMPI_Comm_group(comm, &group);
    if (rc != MPI_SUCCESS)
        return -1;
    rc = PMPI_Group_translate_ranks(group, 1, &rank, sl_core.world_group, &world);
    PMPI_Group_free(&group);
    if (rc != MPI_SUCCESS || world < 0 || world >= sl_core.world_size)
        return -1; /* MPI_UNDEFINED: a process outside this world */
    return world;
}

/* Adds one sent message to the peer table; returns its bytes. */
uint64_t sl_count_send(MPI_Comm comm, int rank, int64_t count, MPI_Datatype datatype)
{
    if (rank == MPI_PROC_NULL)
        return 0;
    uint64_t bytes = sl_type_bytes(count, datatype);
    int peer = sl_world_rank(comm, rank);
    if (peer >= 0) {
        sl_peer_counters *p = &sl_core.peers[peer];
        __atomic_fetch_add(&p->bytes_sent, bytes, __ATOMIC_RELAXED);
        __atomic_fetch_add(&p->msgs_sent, 1, __ATOMIC_RELAXED);
    }
    return bytes;
}

/* Adds one received message, read from its status, to the peer table. */
uint64_t sl_count_recv(MPI_Comm comm, const MPI_Status *status, MPI_Datatype datatype)
{
    if (status->MPI_SOURCE == MPI_PROC_NULL)
        return 0;
    /* Received elements x type size; if the message is not a whole number of
     * elements (MPI_UNDEFINED), fall back to counting it in MPI_BYTE. */
    int n = 0;
    uint64_t bytes = 0;
    if (PMPI_Get_count(status, datatype, &n) == MPI_SUCCESS && n != MPI_UNDEFINED)
        bytes = sl_type_bytes(n, datatype);
    else if (PMPI_Get_count(status, MPI_BYTE, &n) == MPI_SUCCESS && n != MPI_UNDEFINED && n > 0)
        bytes = (uint64_t)n;

    int peer = sl_world_rank(comm, status->MPI_SOURCE);
    if (peer >= 0) {
        sl_peer_counters *p = &sl_core.peers[peer];
        __atomic_fetch_add(&p->bytes_recv, bytes, __ATOMIC_RELAXED);
        __atomic_fetch_add(&p->msgs_recv, 1, __ATOMIC_RELAXED);
    }
    return bytes;
}

/* Relaxed atomic snapshot of one peer entry. */
void sl_core_load_peer(int i, sl_peer_counters *out)
{
    const sl_peer_counters *p = &sl_core.peers[i];
    out->bytes_sent = __atomic_load_n(&p->bytes_sent, __ATOMIC_RELAXED);
    out->msgs_sent = __atomic_load_n(&p->msgs_sent, __ATOMIC_RELAXED);
    out->bytes_recv = __atomic_load_n(&p->bytes_recv, __ATOMIC_RELAXED);
    out->msgs_recv = __atomic_load_n(&p->msgs_recv, __ATOMIC_RELAXED);
}

/* Relaxed atomic snapshot of one op entry. */
void sl_core_load_op(int i, sl_op_counters *out)
{
    const sl_op_counters *c = &sl_core.ops[i];
    out->calls = __atomic_load_n(&c->calls, __ATOMIC_RELAXED);
    out->bytes = __atomic_load_n(&c->bytes, __ATOMIC_RELAXED);
    out->time_ns = __atomic_load_n(&c->time_ns, __ATOMIC_RELAXED);
}
