/*
 * snapshot.c — the rank's crash snapshot file (see snapshot.h).
 */
#define _GNU_SOURCE
#include "snapshot.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "util.h"

/* The file's header as laid out in snapshot.h. */
typedef struct sl_snapshot_header {
    uint32_t magic, version, slot, length[2];
} sl_snapshot_header;

_Static_assert(sizeof(sl_snapshot_header) <= SL_SNAPSHOT_HEADER, "header fits");

static char dir[512];                /* STACKLENS_SNAPSHOT_DIR */
static char name[32];                /* "<pid>.snap" */
static unsigned char *map;           /* the file, mapped shared; NULL: no snapshot */
static unsigned pid;                 /* this rank's, for <pid>.sites */
static int sites_fd = -1;            /* <pid>.sites, opened at the first site */
static int sites_failed;             /* 1: it could not be opened or written: no more tries */

/* Opens the directory if it is this user's, not a link, and closed to everyone else. */
static int open_dir(const char *path, const char **why)
{
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (fd < 0) {
        *why = strerror(errno);
        return -1;
    }
    if (fstat(fd, &st) != 0 || st.st_uid != geteuid() || (st.st_mode & 077) != 0) {
        *why = "not a directory of this user closed to others (0700)";
        close(fd);
        return -1;
    }
    return fd;
}

void sl_snapshot_open(const sl_identity *id)
{
    const char *path = sl_env(SL_SET_SNAPSHOT_DIR);
    if (path == NULL || *path == '\0' || id->run_id == 0 || map != NULL)
        return;
    const char *why = "path too long";
    int dir_fd = strlen(path) < sizeof dir ? open_dir(path, &why) : -1;
    int fd = -1;
    if (dir_fd >= 0) {
        snprintf(name, sizeof name, "%u.snap", (unsigned)id->pid);
        fd = openat(dir_fd, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0 || ftruncate(fd, SL_SNAPSHOT_FILE) != 0)
            why = strerror(errno);
        else if ((map = mmap(NULL, SL_SNAPSHOT_FILE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0))
                 == MAP_FAILED) {
            map = NULL;
            why = strerror(errno);
        }
    }
    if (fd >= 0)
        close(fd); /* the mapping keeps the file */
    if (map == NULL) {
        sl_warn("rank %d: no crash snapshot in %s: %s", sl_core.world_rank, path, why);
        if (fd >= 0)
            unlinkat(dir_fd, name, 0);
        if (dir_fd >= 0)
            close(dir_fd);
        return;
    }
    /* Closed here: the sender thread has a descriptor table of its own (fdtable.h). */
    close(dir_fd);
    snprintf(dir, sizeof dir, "%s", path);
    pid = (unsigned)id->pid;
    sl_snapshot_header h = { .magic = SL_SNAPSHOT_MAGIC, .version = SL_SNAPSHOT_VERSION };
    memcpy(map, &h, sizeof h);
}

int sl_snapshot_active(void)
{
    return map != NULL;
}

void sl_snapshot_write(const sl_frame_builder *b)
{
    if (map == NULL)
        return;
    sl_snapshot_header *h = (sl_snapshot_header *)map;
    uint32_t slot = 1u - __atomic_load_n(&h->slot, __ATOMIC_RELAXED);
    unsigned char *out = map + SL_SNAPSHOT_HEADER + (size_t)slot * SL_SNAPSHOT_SLOT;
    size_t len = sl_frame_peek(b, out, SL_SNAPSHOT_SLOT);
    if (len == 0)
        return;
    __atomic_store_n(&h->length[slot], (uint32_t)len, __ATOMIC_RELEASE);
    __atomic_store_n(&h->slot, slot, __ATOMIC_RELEASE);
}

void sl_snapshot_sites(const sl_rec_callsite_frame *recs, unsigned n)
{
    if (map == NULL || sites_failed || n == 0)
        return;
    if (sites_fd < 0) {
        const char *why;
        char sites[32];
        int dir_fd = open_dir(dir, &why);
        snprintf(sites, sizeof sites, "%u.sites", pid);
        if (dir_fd >= 0) {
            sites_fd = openat(dir_fd, sites,
                              O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
            close(dir_fd);
        }
        if (sites_fd < 0) {
            sites_failed = 1;
            return;
        }
    }
    const unsigned char *p = (const unsigned char *)recs;
    size_t left = (size_t)n * sizeof *recs;
    while (left > 0) {
        ssize_t w = write(sites_fd, p, left);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) { /* tmpfs full: the node resolves what it has; the collector the rest */
            sites_failed = 1;
            return;
        }
        p += w;
        left -= (size_t)w;
    }
}

void sl_snapshot_remove(void)
{
    if (sites_fd >= 0) {
        close(sites_fd);
        sites_fd = -1;
    }
    sites_failed = 1; /* a site described after the final frame has no reader */
    if (map == NULL)
        return;
    munmap(map, SL_SNAPSHOT_FILE);
    map = NULL;
    const char *why;
    int dir_fd = open_dir(dir, &why);
    if (dir_fd >= 0) {
        unlinkat(dir_fd, name, 0);
        close(dir_fd);
    }
}
