/*
 * io.c — the I/O table and descriptor maps (see io.h).
 */
#define _GNU_SOURCE
#include "io.h"

#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "core.h"
#include "fdtable.h"
#include "handles.h"
#include "lifecycle.h"

sl_keytab sl_io;
int sl_io_enabled[SL_IO_LAYER_END];
int32_t *sl_io_fd_map[SL_IO_LAYER_END];
static int io_phase; /* phase of new entries (atomic): 1 until MPI_Init in an MPI rank */

/* Opens by an absolute name the thread made before, each mapped to the entry that
 * open found: the readlink of /proc/self/fd/N (half of an open's cost under the
 * library) and the entry's lookup are skipped when the same name opens the same
 * file (device and inode) again at the same layer and phase. A name that leads to
 * another file (a symbolic link changed, a file renamed or made anew) is looked up
 * again. The opens of one file by one name keep the path the kernel gave the first
 * time even if it would now give another: only when a directory on the way was
 * moved and a symbolic link to it put in its place, or a hard link of that same
 * file was reached through a changed link. Direct-mapped by the name's hash. */
typedef struct opened_name {
    uint64_t name_hash, dev, ino;
    uint32_t gen;  /* opened_gen when stored; 0 (never stored): an empty slot */
    int32_t entry;
    uint8_t layer, phase;
} opened_name;

#define SL_OPENED_NAMES 32 /* per thread; a power of two */
static __thread opened_name opened_names[SL_OPENED_NAMES] __attribute__((tls_model("initial-exec")));
static uint32_t opened_gen = 1; /* moved by sl_io_init: a new table's entries are others */

/* Overflow entries: one per layer and phase, (layer - 1) x 2 + phase. */
#define SL_IO_OVERFLOWS (SL_BOUND_max_io_layer * (SL_BOUND_max_io_phase + 1))

static unsigned overflow_of(unsigned layer, unsigned phase)
{
    return (layer - 1) * (SL_BOUND_max_io_phase + 1) + phase;
}

/* The key of overflow entry i: its layer and phase, path "<other>". */
static void io_overflow_key(void *key, unsigned i)
{
    sl_io_key *k = key;
    k->layer = 1 + i / (SL_BOUND_max_io_phase + 1);
    k->phase = i % (SL_BOUND_max_io_phase + 1);
    sl_copy_text(k->path, sizeof k->path, "<other>");
}

/* Sets up the table, its overflow keys and the two fd maps. */
int sl_io_init(unsigned max_keys, const int disabled[SL_IO_LAYER_END], int startup)
{
    sl_threads_init(); /* threads doing file I/O get counter blocks, MPI or not */
    sl_io_fd_map[SL_IO_POSIX] = calloc(SL_MAX_FD, sizeof(int32_t));
    sl_io_fd_map[SL_IO_STDIO] = calloc(SL_MAX_FD, sizeof(int32_t));
    if (sl_io_fd_map[SL_IO_POSIX] == NULL || sl_io_fd_map[SL_IO_STDIO] == NULL
        || sl_keytab_init(&sl_io, max_keys, sizeof(sl_io_key), SL_IO_NVALS, SL_IO_OVERFLOWS,
                          io_overflow_key) != 0) {
        free(sl_io_fd_map[SL_IO_POSIX]);
        free(sl_io_fd_map[SL_IO_STDIO]);
        sl_io_fd_map[SL_IO_POSIX] = sl_io_fd_map[SL_IO_STDIO] = NULL;
        return -1;
    }
    for (unsigned layer = 1; layer < SL_IO_LAYER_END; layer++)
        sl_io_enabled[layer] = !disabled[layer];
    __atomic_add_fetch(&opened_gen, 1, __ATOMIC_RELAXED);
    io_phase = startup ? 1 : 0;
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

/*
 * The mount table, read from /proc/self/mountinfo at the first open and read
 * again when a file's device is not that of the longest mount point over its
 * path (a mount came or went), at most once a second (some file systems,
 * e.g. overlayfs, report devices mountinfo does not list). Bounded: at most
 * SL_MAX_MOUNTS mount points of fewer than 256 bytes; opens are not a hot path.
 */
#define SL_MAX_MOUNTS 512
#define SL_MOUNT_REREAD_NS 1000000000ull
static struct sl_mount {
    char point[256];
    char fstype[sizeof(((sl_io_key *)0)->fstype)];
    dev_t dev;
} mounts[SL_MAX_MOUNTS];
static unsigned n_mounts;
static uint64_t mounts_read_ns; /* 0: never read */
static pthread_mutex_t mounts_lock = PTHREAD_MUTEX_INITIALIZER;

/* Reads the mount table (under mounts_lock). */
static void mounts_read(void)
{
    int saved = sl_tls_in_call;
    sl_tls_in_call = 1; /* our own reads of mountinfo are not the application's */
    FILE *f = fopen("/proc/self/mountinfo", "re");
    char line[4096];
    n_mounts = 0;
    while (f != NULL && n_mounts < SL_MAX_MOUNTS && fgets(line, sizeof line, f) != NULL) {
        /* id parent maj:min root mountpoint opts [optional...] - fstype source opts */
        char *save, *fields[5] = { 0 };
        char *tok = strtok_r(line, " ", &save);
        for (int i = 0; tok != NULL && i < 5; i++, tok = strtok_r(NULL, " ", &save))
            fields[i] = tok;
        while (tok != NULL && strcmp(tok, "-") != 0)
            tok = strtok_r(NULL, " ", &save);
        char *fstype = tok != NULL ? strtok_r(NULL, " ", &save) : NULL;
        unsigned major, minor;
        if (fields[4] == NULL || fstype == NULL || sscanf(fields[2], "%u:%u", &major, &minor) != 2)
            continue;
        unescape(fields[4]);
        struct sl_mount *m = &mounts[n_mounts];
        if (strlen(fields[4]) >= sizeof m->point)
            continue;
        strcpy(m->point, fields[4]);
        sl_copy_text(m->fstype, sizeof m->fstype, fstype);
        m->dev = makedev(major, minor);
        n_mounts++;
    }
    if (f != NULL)
        fclose(f);
    mounts_read_ns = sl_mono_ns();
    sl_tls_in_call = saved;
}

/* The mount with the longest mount point over path (the last listed of equals:
 * it is mounted over the others), or NULL. */
static const struct sl_mount *mount_over(const char *path)
{
    const struct sl_mount *best = NULL;
    size_t best_len = 0;
    for (unsigned i = 0; i < n_mounts; i++) {
        size_t n = strlen(mounts[i].point);
        int under = strncmp(path, mounts[i].point, n) == 0
                    && (n == 1 || path[n] == '/' || path[n] == '\0');
        if (under && (best == NULL || n >= best_len)) {
            best = &mounts[i];
            best_len = n;
        }
    }
    return best;
}

/* Fills k->mount and k->fstype for k->path, a file on device dev. */
static void fill_mount(sl_io_key *k, dev_t dev)
{
    pthread_mutex_lock(&mounts_lock);
    if (mounts_read_ns == 0)
        mounts_read();
    const struct sl_mount *m = mount_over(k->path);
    if ((m == NULL || m->dev != dev) && sl_mono_ns() - mounts_read_ns >= SL_MOUNT_REREAD_NS) {
        mounts_read();
        m = mount_over(k->path);
    }
    if (m != NULL) {
        sl_copy_text(k->mount, sizeof k->mount, m->point);
        memcpy(k->fstype, m->fstype, sizeof k->fstype);
    }
    pthread_mutex_unlock(&mounts_lock);
}

/* Entry of a complete key (the overflow entry of its layer and phase when full). */
static int entry_of(const sl_io_key *key)
{
    return (int)sl_keytab_get(&sl_io, key, sl_hash_key(key, sizeof *key),
                              overflow_of(key->layer, key->phase));
}

/* Entry of (layer, absolute path on device dev) in the current phase, created if new. */
static int entry_for(int layer, const char *path, dev_t dev)
{
    sl_io_key key;
    memset(&key, 0, sizeof key);
    key.layer = (uint32_t)layer;
    key.phase = (uint32_t)__atomic_load_n(&io_phase, __ATOMIC_RELAXED);
    sl_copy_path(key.path, sizeof key.path, path);
    fill_mount(&key, dev);
    int e = entry_of(&key);
    sl_standalone_start();
    return e;
}

/* Start-up I/O ends: the phase turns to 0 and each descriptor mapped to a
 * start-up entry is mapped to the program entry of the same file. */
void sl_io_startup_end(void)
{
    if (__atomic_exchange_n(&io_phase, 0, __ATOMIC_RELAXED) == 0 || sl_io.entries == NULL)
        return;
    for (int layer = SL_IO_POSIX; layer <= SL_IO_STDIO; layer++) {
        for (unsigned fd = 0; sl_io_fd_map[layer] != NULL && fd < SL_MAX_FD; fd++) {
            int32_t e = __atomic_load_n(&sl_io_fd_map[layer][fd], __ATOMIC_RELAXED) - 1;
            if (e < 0)
                continue;
            sl_io_key key = *(const sl_io_key *)sl_keytab_key(&sl_io, (unsigned)e);
            if (key.phase == 0)
                continue;
            key.phase = 0;
            int program = (unsigned)e >= sl_io.max_keys
                              ? (int)sl_keytab_overflow(&sl_io, overflow_of(key.layer, 0))
                              : entry_of(&key);
            __atomic_store_n(&sl_io_fd_map[layer][fd], program + 1, __ATOMIC_RELAXED);
        }
    }
}

/* The file behind fd, whose status is st, if it is a regular file outside /proc,
 * /sys, /dev: its absolute path, as the kernel names the open file. */
static int fd_path(int fd, const struct stat *st, char *path, size_t n)
{
    char link[64];
    if (!S_ISREG(st->st_mode))
        return -1;
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t len = readlink(link, path, n - 1);
    if (len <= 0)
        return -1;
    path[len] = '\0';
    return excluded(path) ? -1 : 0;
}

/* The slot of a name (by its hash) in the thread's opened names. */
static opened_name *opened_slot(uint64_t name_hash)
{
    return &opened_names[name_hash & (SL_OPENED_NAMES - 1)];
}

/* Entry remembered for an open of the absolute name (hash h) of file st, or -1. */
static int opened_before(uint64_t h, const struct stat *st, int layer, unsigned phase)
{
    const opened_name *o = opened_slot(h);
    if (o->name_hash == h && o->dev == (uint64_t)st->st_dev
        && o->ino == (uint64_t)st->st_ino && o->layer == layer && o->phase == phase
        && o->gen == __atomic_load_n(&opened_gen, __ATOMIC_RELAXED))
        return o->entry;
    return -1;
}

/* Maps a newly opened fd to its file entry and counts the open; returns the entry. */
int sl_io_opened(int layer, int fd, uint64_t ticks, const char *named)
{
    if (fd < 0 || fd >= SL_MAX_FD || sl_io_fd_map[layer] == NULL || sl_tls_fdtable_private)
        return -1;
    char path[PATH_MAX];
    struct stat st;
    int saved = sl_tls_in_call;
    sl_tls_in_call = 1;
    int ok = fstat(fd, &st) == 0;
    unsigned phase = (unsigned)__atomic_load_n(&io_phase, __ATOMIC_RELAXED);
    uint64_t h = 0;
    int e = -1;
    if (ok && named != NULL && named[0] == '/') {
        h = sl_hash_key(named, strlen(named));
        e = opened_before(h, &st, layer, phase);
    }
    if (e < 0)
        ok = ok && fd_path(fd, &st, path, sizeof path) == 0;
    sl_tls_in_call = saved;
    if (!ok) {
        __atomic_store_n(&sl_io_fd_map[layer][fd], 0, __ATOMIC_RELAXED);
        return -1;
    }
    if (e < 0) {
        e = entry_for(layer, path, st.st_dev);
        if (h != 0 && (unsigned)e < sl_io.max_keys)
            *opened_slot(h) = (opened_name){.name_hash = h, .dev = (uint64_t)st.st_dev,
                                            .ino = (uint64_t)st.st_ino,
                                            .gen = __atomic_load_n(&opened_gen, __ATOMIC_RELAXED),
                                            .entry = e, .layer = (uint8_t)layer,
                                            .phase = (uint8_t)phase};
    }
    __atomic_store_n(&sl_io_fd_map[layer][fd], e + 1, __ATOMIC_RELAXED);
    sl_keytab_add(&sl_io, (unsigned)e, SL_IO_OPENS, 1);
    sl_keytab_add(&sl_io, (unsigned)e, SL_IO_META_TIME, ticks);
    return e;
}

/* Forgets fd at layer, counting the close's time on its entry (returned, -1 if
 * fd was not a tracked file). The descriptors of a thread with a private table
 * (the sender, see fdtable.h) are not the application's: their numbers say
 * nothing about its files. */
int sl_io_closed(int layer, int fd, uint64_t ticks)
{
    if (fd < 0 || fd >= SL_MAX_FD || sl_io_fd_map[layer] == NULL || sl_tls_fdtable_private)
        return -1;
    int32_t e = __atomic_exchange_n(&sl_io_fd_map[layer][fd], 0, __ATOMIC_RELAXED);
    if (e > 0)
        sl_keytab_add(&sl_io, (unsigned)e - 1, SL_IO_META_TIME, ticks);
    return (int)e - 1;
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
    size_t size = sl_keytab_entries(&sl_io) * SL_IO_NVALS * sizeof(uint64_t);
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
    struct stat st;
    mpiio_path(filename, path, sizeof path);
    int e = entry_for(SL_IO_MPIIO, path, stat(path, &st) == 0 ? st.st_dev : 0);
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
