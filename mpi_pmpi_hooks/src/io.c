/*
 * io.c — the I/O table and descriptor maps (see io.h).
 */
#define _GNU_SOURCE
#include "io.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core.h"
#include "fdtable.h"
#include "handles.h"
#include "lifecycle.h"

sl_keytab sl_io;
int sl_io_enabled[4];
int32_t *sl_io_fd_map[3];

/* Sets up the table, its overflow key "<other>", and the two fd maps. */
int sl_io_init(unsigned max_keys, int posix, int stdio, int mpiio)
{
    static sl_io_key overflow = { .layer = 0, .path = "<other>" };
    sl_threads_init(); /* threads doing file I/O get counter blocks, MPI or not */
    sl_io_fd_map[SL_IO_POSIX] = calloc(SL_MAX_FD, sizeof(int32_t));
    sl_io_fd_map[SL_IO_STDIO] = calloc(SL_MAX_FD, sizeof(int32_t));
    if (sl_io_fd_map[SL_IO_POSIX] == NULL || sl_io_fd_map[SL_IO_STDIO] == NULL
        || sl_keytab_init(&sl_io, max_keys, sizeof(sl_io_key), SL_IO_NVALS, &overflow) != 0) {
        free(sl_io_fd_map[SL_IO_POSIX]);
        free(sl_io_fd_map[SL_IO_STDIO]);
        sl_io_fd_map[SL_IO_POSIX] = sl_io_fd_map[SL_IO_STDIO] = NULL;
        return -1;
    }
    sl_io_enabled[SL_IO_POSIX] = posix;
    sl_io_enabled[SL_IO_STDIO] = stdio;
    sl_io_enabled[SL_IO_MPIIO] = mpiio;
    return 0;
}

/* True if path is not file-system I/O (virtual file systems, devices). */
static int excluded(const char *path)
{
    return path[0] != '/' || strncmp(path, "/proc/", 6) == 0 || strncmp(path, "/sys/", 5) == 0
           || strncmp(path, "/dev/", 5) == 0;
}

/* Unescapes the \\ooo octal escapes of a mountinfo field in place. */
static void unescape(char *s)
{
    char *o = s;
    for (; *s != '\0'; s++, o++) {
        if (s[0] == '\\' && s[1] >= '0' && s[1] <= '7' && s[2] && s[3]) {
            *o = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
            s += 3;
        } else {
            *o = *s;
        }
    }
    *o = '\0';
}

/* Fills the mount and fstype of a new entry: the longest matching mount point. */
static void fill_mount(void *key_area, void *arg)
{
    (void)arg;
    sl_io_key *k = key_area;
    int saved = sl_tls_in_call;
    sl_tls_in_call = 1; /* our own reads of mountinfo are not the application's */
    FILE *f = fopen("/proc/self/mountinfo", "re");
    size_t best = 0;
    char line[4096];
    while (f != NULL && fgets(line, sizeof line, f) != NULL) {
        /* id parent maj:min root mountpoint opts [optional...] - fstype source opts */
        char *save, *fields[5] = { 0 };
        char *tok = strtok_r(line, " ", &save);
        for (int i = 0; tok != NULL && i < 5; i++, tok = strtok_r(NULL, " ", &save))
            fields[i] = tok;
        while (tok != NULL && strcmp(tok, "-") != 0)
            tok = strtok_r(NULL, " ", &save);
        char *fstype = tok != NULL ? strtok_r(NULL, " ", &save) : NULL;
        if (fields[4] == NULL || fstype == NULL)
            continue;
        unescape(fields[4]);
        size_t n = strlen(fields[4]);
        int under = strncmp(k->path, fields[4], n) == 0
                    && (n == 1 || k->path[n] == '/' || k->path[n] == '\0');
        if (under && n >= best) {
            best = n;
            sl_copy_text(k->mount, sizeof k->mount, fields[4]);
            sl_copy_text(k->fstype, sizeof k->fstype, fstype);
        }
    }
    if (f != NULL)
        fclose(f);
    sl_tls_in_call = saved;
}

/* Entry of (layer, absolute path), created if new. */
static int entry_for(int layer, const char *path)
{
    sl_io_key key;
    memset(&key, 0, sizeof key);
    key.layer = (uint32_t)layer;
    sl_copy_path(key.path, sizeof key.path, path);
    size_t cmp = offsetof(sl_io_key, mount);
    unsigned e = sl_keytab_get(&sl_io, &key, sl_hash_bytes(&key, cmp), fill_mount, NULL);
    sl_standalone_start();
    return (int)e;
}

/* The file behind fd if it is a regular file outside /proc, /sys, /dev. */
static int fd_path(int fd, char *path, size_t n)
{
    struct stat st;
    char link[64];
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
        return -1;
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t len = readlink(link, path, n - 1);
    if (len <= 0)
        return -1;
    path[len] = '\0';
    return excluded(path) ? -1 : 0;
}

/* Maps a newly opened fd to its file entry and counts the open. */
void sl_io_opened(int layer, int fd, uint64_t ticks)
{
    if (fd < 0 || fd >= SL_MAX_FD || sl_io_fd_map[layer] == NULL || sl_tls_fdtable_private)
        return;
    char path[PATH_MAX];
    int saved = sl_tls_in_call;
    sl_tls_in_call = 1;
    int ok = fd_path(fd, path, sizeof path) == 0;
    sl_tls_in_call = saved;
    if (!ok) {
        __atomic_store_n(&sl_io_fd_map[layer][fd], 0, __ATOMIC_RELAXED);
        return;
    }
    int e = entry_for(layer, path);
    __atomic_store_n(&sl_io_fd_map[layer][fd], e + 1, __ATOMIC_RELAXED);
    sl_keytab_add(&sl_io, (unsigned)e, SL_IO_OPENS, 1);
    sl_keytab_add(&sl_io, (unsigned)e, SL_IO_META_TIME, ticks);
}

/* Forgets fd at layer, counting the close's time on its entry. The
 * descriptors of a thread with a private table (the sender, see fdtable.h)
 * are not the application's: their numbers say nothing about its files. */
void sl_io_closed(int layer, int fd, uint64_t ticks)
{
    if (fd < 0 || fd >= SL_MAX_FD || sl_io_fd_map[layer] == NULL || sl_tls_fdtable_private)
        return;
    int32_t e = __atomic_exchange_n(&sl_io_fd_map[layer][fd], 0, __ATOMIC_RELAXED);
    if (e > 0)
        sl_keytab_add(&sl_io, (unsigned)e - 1, SL_IO_META_TIME, ticks);
}

/* Copies the POSIX mapping of oldfd to newfd (or clears newfd's). */
void sl_io_dup(int oldfd, int newfd)
{
    if (newfd < 0 || newfd >= SL_MAX_FD || sl_io_fd_map[SL_IO_POSIX] == NULL
        || sl_tls_fdtable_private)
        return;
    int32_t e = oldfd >= 0 && oldfd < SL_MAX_FD
                    ? __atomic_load_n(&sl_io_fd_map[SL_IO_POSIX][oldfd], __ATOMIC_RELAXED) : 0;
    __atomic_store_n(&sl_io_fd_map[SL_IO_POSIX][newfd], e, __ATOMIC_RELAXED);
}

/* Forgets descriptors first..last (up to SL_MAX_FD) at both layers, no time counted. */
void sl_io_forget(unsigned first, unsigned last)
{
    if (sl_tls_fdtable_private)
        return;
    unsigned end = last < SL_MAX_FD - 1 ? last : SL_MAX_FD - 1;
    for (int layer = SL_IO_POSIX; layer <= SL_IO_STDIO; layer++)
        for (unsigned fd = first; sl_io_fd_map[layer] != NULL && fd <= end; fd++)
            __atomic_store_n(&sl_io_fd_map[layer][fd], 0, __ATOMIC_RELAXED);
}

/* The I/O rows of each counter block, mapped at its first claim (atomic pointers). */
static uint64_t *block_rows[SL_THREAD_BLOCKS];

/* Maps block i's rows the first time the block is claimed; only its owner
 * gets here, so there is no race on block_rows[i]. */
uint64_t *sl_io_block_rows(unsigned i)
{
    if (sl_io.entries == NULL || i >= SL_THREAD_BLOCKS)
        return NULL;
    uint64_t *rows = __atomic_load_n(&block_rows[i], __ATOMIC_ACQUIRE);
    if (rows != NULL)
        return rows;
    size_t size = ((size_t)sl_io.max_keys + 1) * SL_IO_NVALS * sizeof(uint64_t);
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    __atomic_store_n(&block_rows[i], (uint64_t *)p, __ATOMIC_RELEASE);
    return p;
}

/* Shared counters of entry e plus its row in every block ever claimed. */
void sl_io_load(unsigned e, uint64_t out[SL_IO_NVALS])
{
    const uint64_t *v = sl_keytab_vals(&sl_io, e);
    for (int f = 0; f < SL_IO_NVALS; f++)
        out[f] = __atomic_load_n(&v[f], __ATOMIC_RELAXED);
    unsigned used = sl_thread_blocks_used();
    for (unsigned b = 0; b < used; b++) {
        const uint64_t *rows = __atomic_load_n(&block_rows[b], __ATOMIC_ACQUIRE);
        if (rows == NULL)
            continue;
        const uint64_t *r = rows + (size_t)e * SL_IO_NVALS;
        for (int f = 0; f < SL_IO_NVALS; f++)
            out[f] += __atomic_load_n(&r[f], __ATOMIC_RELAXED);
    }
}

/* Absolute path of an MPI-IO file name ("ufs:" style prefixes dropped). */
static void mpiio_path(const char *filename, char *out, size_t n)
{
    const char *colon = strchr(filename, ':');
    if (colon != NULL && colon - filename > 1 && strchr(filename, '/') > colon)
        filename = colon + 1;
    char joined[PATH_MAX];
    if (filename[0] == '/') {
        snprintf(joined, sizeof joined, "%s", filename);
    } else {
        char cwd[PATH_MAX];
        if (getcwd(cwd, sizeof cwd) == NULL)
            cwd[0] = '\0';
        snprintf(joined, sizeof joined, "%s/%s", cwd, filename);
    }
    if (realpath(joined, out) == NULL)
        snprintf(out, n, "%s", joined);
}

/* MPI_File_open: an open of the file at layer 3. */
void sl_mpiio_open(MPI_File fh, const char *filename, uint64_t ticks)
{
    if (!sl_io_enabled[SL_IO_MPIIO] || sl_io.entries == NULL || filename == NULL)
        return;
    char path[PATH_MAX];
    mpiio_path(filename, path, sizeof path);
    int e = entry_for(SL_IO_MPIIO, path);
    sl_keytab_add(&sl_io, (unsigned)e, SL_IO_OPENS, 1);
    sl_keytab_add(&sl_io, (unsigned)e, SL_IO_META_TIME, ticks);
    sl_file_remember(fh, e);
}

/* MPI_File_close: meta time, handle forgotten. */
void sl_mpiio_close(MPI_File fh, uint64_t ticks)
{
    int e = sl_file_lookup(fh);
    if (e < 0)
        return;
    sl_io_meta(e, ticks);
    sl_handle_forget(SL_H_FILE, SL_HKEY(fh));
}

/* An MPI-IO read. */
void sl_mpiio_read(MPI_File fh, uint64_t bytes, uint64_t ticks)
{
    int e = sl_file_lookup(fh);
    if (e >= 0)
        sl_io_rw(e, 0, bytes, ticks);
}

/* An MPI-IO write. */
void sl_mpiio_write(MPI_File fh, uint64_t bytes, uint64_t ticks)
{
    int e = sl_file_lookup(fh);
    if (e >= 0)
        sl_io_rw(e, 1, bytes, ticks);
}

/* An MPI-IO metadata call. */
void sl_mpiio_meta(MPI_File fh, uint64_t ticks)
{
    int e = sl_file_lookup(fh);
    if (e >= 0)
        sl_io_meta(e, ticks);
}
