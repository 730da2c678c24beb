/*
 * ibport.c — the host's InfiniBand port counters from sysfs as per-interval
 * deltas (see ibport.h). Everything but sl_ibport_init runs on the sender
 * thread; the state below belongs to it once the sender has started.
 */
#include "ibport.h"

#include <dirent.h>
#include <fcntl.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "core.h"
#include "util.h"

_Static_assert(sizeof(sl_rec_hca) == 136, "hca record must be 136 bytes (tests/test_wire.py)");

#define SL_SYSFS_DEFAULT "/sys/class/infiniband"

/* One counter file: its name, the factor to bytes/packets/ticks, and the
 * all-ones value of its PortCounters width (a counter there is saturated). */
typedef struct sl_ibcounter {
    const char *file;
    uint64_t scale;
    uint64_t saturated;
} sl_ibcounter;

/* The all-ones value of a width of bits bits. */
#define SL_ALL_ONES(bits) ((bits) >= 64 ? UINT64_MAX : (UINT64_C(1) << (bits)) - 1)

/* Column of each counter (contract/port_counters.def, the hca record's field order). */
#define SL_PORT_COUNTER(name, ...) SL_PC_##name,
enum {
#include "port_counters.def"
};
#undef SL_PORT_COUNTER

/* In the order of the hca record's counter fields: bit i of `valid` is counters[i]. */
#define SL_PORT_COUNTER(name, kind, basic_bits, ext_bits, scale, mad, mad_ext, sysfs, ibsim) \
    { sysfs, scale, SL_ALL_ONES(basic_bits) },
static const sl_ibcounter counters[] = {
#include "port_counters.def"
};
#undef SL_PORT_COUNTER
#define SL_NCOUNTERS (sizeof counters / sizeof counters[0])

/* One local port and its counter values at the previous read. */
typedef struct sl_ibport {
    char device[sizeof(((sl_rec_hca *)0)->device)];
    uint32_t port;
    uint64_t node_guid;
    uint64_t last[SL_NCOUNTERS];
    uint32_t have;  /* bit i: last[i] holds a value */
    uint32_t known; /* bit i: the last interval's delta of counter i was known */
} sl_ibport;

static int reporting;      /* this rank reports its host's ports */
static char root[512];     /* the sysfs class directory */
static sl_ibport ports[SL_IBPORT_MAX_PORTS];
static unsigned nports;

/* True if the launcher says this process is the first of its node (see sl_ibport_init). */
static int first_on_node(void)
{
    static const char *const vars[] = { "MPI_LOCALRANKID", "OMPI_COMM_WORLD_LOCAL_RANK",
                                        "SLURM_LOCALID" };
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (v != NULL && *v != '\0')
            return strcmp(v, "0") == 0;
    }
    return 0;
}

/* Decides who reports: lowest world rank per host name on each shared-memory node. */
void sl_ibport_init(const char *host, int whole)
{
    const size_t n = sizeof(((sl_frame_header *)0)->host);
    MPI_Comm node;
    int me = 0, size = 0, world_rank;
    reporting = 0;
    const char *env = sl_env(SL_SET_SYSFS_ROOT);
    snprintf(root, sizeof root, "%s", env != NULL && *env != '\0' ? env : SL_SYSFS_DEFAULT);
    if (!whole) {
        reporting = first_on_node();
        return;
    }
    if (PMPI_Comm_rank(sl_core.world_comm, &world_rank) != MPI_SUCCESS
        || PMPI_Comm_split_type(sl_core.world_comm, MPI_COMM_TYPE_SHARED, world_rank, MPI_INFO_NULL,
                                &node) != MPI_SUCCESS)
        return;
    char *names = NULL;
    int ok = 0, all_ok = 0;
    if (PMPI_Comm_rank(node, &me) == MPI_SUCCESS && PMPI_Comm_size(node, &size) == MPI_SUCCESS)
        ok = (names = malloc((size_t)size * n)) != NULL;
    /* Every rank of the node must take part in the gather with the same counts. */
    if (PMPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, node) == MPI_SUCCESS && all_ok
        && PMPI_Allgather(host, (int)n, MPI_CHAR, names, (int)n, MPI_CHAR, node) == MPI_SUCCESS) {
        /* The node's ranks are in world-rank order (the split key): report
         * if no lower one carries the same host name. */
        reporting = 1;
        for (int i = 0; i < me; i++)
            if (memcmp(names + (size_t)i * n, host, n) == 0)
                reporting = 0;
    }
    free(names);
    PMPI_Comm_free(&node);
}

/* Reads a small sysfs file into buf (NUL-terminated); 0, or -1 if absent/unreadable. */
static int read_text(const char *path, char *buf, size_t size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t len = read(fd, buf, size - 1);
    close(fd);
    if (len <= 0)
        return -1;
    buf[len] = '\0';
    return 0;
}

/* Reads one counter of a port; 0 with *value set, or -1 if absent or not a number. */
static int read_counter(const sl_ibport *p, const char *file, uint64_t *value)
{
    char path[1024], text[64], *end;
    snprintf(path, sizeof path, "%s/%s/ports/%u/counters/%s", root, p->device, p->port, file);
    if (read_text(path, text, sizeof text) != 0)
        return -1;
    *value = strtoull(text, &end, 10);
    return end != text && (*end == '\0' || *end == '\n') ? 0 : -1;
}

/* node_guid "0c42:a103:0049:b8f6" as a number, 0 if absent. */
static uint64_t read_guid(const char *device)
{
    char path[1024], text[64];
    uint64_t guid = 0;
    snprintf(path, sizeof path, "%s/%s/node_guid", root, device);
    if (read_text(path, text, sizeof text) != 0)
        return 0;
    for (const char *c = text; *c != '\0' && *c != '\n'; c++) {
        int digit = *c >= '0' && *c <= '9'   ? *c - '0'
                    : *c >= 'a' && *c <= 'f' ? *c - 'a' + 10
                    : *c >= 'A' && *c <= 'F' ? *c - 'A' + 10
                                             : -1;
        if (digit >= 0)
            guid = guid << 4 | (uint64_t)digit;
        else if (*c != ':')
            return 0;
    }
    return guid;
}

/* Orders ports by device name, then port number. */
static int port_order(const void *a, const void *b)
{
    const sl_ibport *x = a, *y = b;
    int c = strncmp(x->device, y->device, sizeof x->device);
    return c != 0 ? c : (x->port > y->port) - (x->port < y->port);
}

/* Adds every port of one device (<root>/<device>/ports/<n>). */
static void find_ports(const char *device)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s/ports", root, device);
    DIR *dir = opendir(path);
    if (dir == NULL)
        return;
    uint64_t guid = read_guid(device);
    struct dirent *e;
    while ((e = readdir(dir)) != NULL && nports < SL_IBPORT_MAX_PORTS) {
        char *end;
        unsigned long num = strtoul(e->d_name, &end, 10);
        if (end == e->d_name || *end != '\0' || num > UINT32_MAX)
            continue;
        sl_ibport *p = &ports[nports++];
        memset(p, 0, sizeof *p);
        sl_copy_text(p->device, sizeof p->device, device);
        p->port = (uint32_t)num;
        p->node_guid = guid;
    }
    closedir(dir);
}

/* Reads every counter of p; bit i of the result: values[i] was read. */
static uint32_t read_port(const sl_ibport *p, uint64_t values[SL_NCOUNTERS])
{
    uint32_t present = 0;
    for (unsigned i = 0; i < SL_NCOUNTERS; i++)
        if (read_counter(p, counters[i].file, &values[i]) == 0)
            present |= 1u << i;
    return present;
}

/* Finds the local ports and reads their baseline. */
void sl_ibport_start(void)
{
    if (!reporting)
        return;
    nports = 0;
    DIR *dir = opendir(root);
    if (dir == NULL)
        return; /* no RDMA device: nothing is ever sent */
    struct dirent *e;
    while ((e = readdir(dir)) != NULL && nports < SL_IBPORT_MAX_PORTS)
        if (e->d_name[0] != '.' && strlen(e->d_name) < sizeof ports[0].device)
            find_ports(e->d_name);
    closedir(dir);
    qsort(ports, nports, sizeof ports[0], port_order);
    for (unsigned k = 0; k < nports; k++)
        ports[k].have = read_port(&ports[k], ports[k].last);
}

/* Fills r with the deltas of p since the last read and advances the baseline;
 * returns 1 if the record is to be sent: it has a known non-zero delta, or a
 * counter known in the last interval is unknown in this one (a reset, a file
 * gone): that interval is then stored with the counter unknown, never read as
 * "nothing moved". A counter that stays unknown (saturated, absent) is sent
 * only with other news. */
static int port_deltas(sl_ibport *p, sl_rec_hca *r)
{
    uint64_t now[SL_NCOUNTERS], d[SL_NCOUNTERS] = { 0 };
    uint32_t present = read_port(p, now), valid = 0;
    uint64_t any = 0;
    for (unsigned i = 0; i < SL_NCOUNTERS; i++) {
        uint32_t bit = 1u << i;
        if ((present & p->have & bit) && now[i] >= p->last[i]
            && now[i] != counters[i].saturated) {
            d[i] = (now[i] - p->last[i]) * counters[i].scale;
            valid |= bit;
            any |= d[i];
        }
        p->last[i] = now[i];
    }
    p->have = present;
    uint32_t lost = p->known & ~valid;
    p->known = valid;
    memset(r, 0, sizeof *r);
    memcpy(r->device, p->device, sizeof r->device);
    r->port = p->port;
    r->valid = valid;
    r->node_guid = p->node_guid;
#define SL_PORT_COUNTER(name, ...) r->name = d[SL_PC_##name];
#include "port_counters.def"
#undef SL_PORT_COUNTER
    return any != 0 || lost != 0;
}

/* Writes the hca section of this interval at out; returns its size (0 if empty). */
size_t sl_ibport_put(unsigned char *out)
{
    uint32_t count = 0;
    size_t pos = SL_SECTION_HEADER_SIZE;
    for (unsigned k = 0; reporting && k < nports; k++) {
        sl_rec_hca r;
        if (!port_deltas(&ports[k], &r))
            continue;
        memcpy(out + pos, &r, sizeof r);
        pos += sizeof r;
        count++;
    }
    if (count == 0)
        return 0;
    uint16_t table = SL_TABLE_hca, size = sizeof(sl_rec_hca);
    memcpy(out, &table, 2);
    memcpy(out + 2, &size, 2);
    memcpy(out + 4, &count, 4);
    return pos;
}
