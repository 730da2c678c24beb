/*
 * spool.c — frames to and from the spool directory (see spool.h).
 */
#define _GNU_SOURCE
#include "spool.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core.h"
#include "stacklens_wire.h"
#include "util.h"

#define SL_REJECTED "rejected"

static char dir[512];
static char prefix[sizeof(((sl_frame_header *)0)->job_id) + 1]; /* sanitised job id */
static int dir_fd = -1, rejected_fd = -1; /* opened at the first write */
static uint64_t run_id; /* of the frames spooled, from the first one's header */
static uint64_t cap_bytes, written, node_cap_bytes;
static int warned;

/* Warns once about the spool. */
static void spool_warn(const char *what, int err)
{
    if (warned)
        return;
    warned = 1;
    sl_warn("rank %d: spool %s: %s%s%s; frames that cannot be delivered are lost",
            sl_core.world_rank, dir, what, err ? ": " : "", err ? strerror(err) : "");
}

/* mkdir -p of the parents of path (mode 0700 for those it creates); 0 or -1 with errno. */
static int make_parents(const char *path)
{
    char buf[sizeof dir];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p != '\0'; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, 0700) != 0 && errno != EEXIST)
            return -1;
        *p = '/';
    }
    return 0;
}

/*
 * Opens directory name (relative to at, or absolute), creating it 0700 if
 * missing: a descriptor, or -1 with *why set if it is not a directory of
 * this user (a symlink, a file, another user's directory) or cannot be made.
 */
static int open_own_dir(int at, const char *name, const char **why)
{
    if (mkdirat(at, name, 0700) != 0 && errno != EEXIST) {
        *why = "cannot create the directory";
        return -1;
    }
    int fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (fd < 0) {
        *why = errno == ENOTDIR || errno == ELOOP ? "not a directory (or a symlink): refused"
                                                  : "cannot open the directory";
        return -1;
    }
    if (fstat(fd, &st) != 0 || st.st_uid != geteuid()) {
        close(fd);
        errno = 0;
        *why = "owned by another user: refused";
        return -1;
    }
    return fd;
}

/* Records the directory and caps; the job id comes with the first frame. */
void sl_spool_init(const char *path, unsigned max_mb, unsigned node_max_mb)
{
    snprintf(dir, sizeof dir, "%s", path);
    cap_bytes = (uint64_t)max_mb << 20;
    node_cap_bytes = (uint64_t)node_max_mb << 20;
    written = 0;
    prefix[0] = '\0';
}

/* The spool directory. */
const char *sl_spool_dir(void)
{
    return dir;
}

/* Opens the directory at the first write; the prefix from the frame's job id. 0 or -1. */
static int spool_open(const unsigned char *buf)
{
    if (dir_fd >= 0)
        return 0;
    const sl_frame_header *h = (const sl_frame_header *)buf;
    size_t i = 0;
    for (; i < sizeof h->job_id && h->job_id[i] != '\0'; i++) {
        char c = h->job_id[i];
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
                 || c == '.' || c == '_' || c == '-';
        prefix[i] = ok ? c : '_';
    }
    prefix[i] = '\0';
    run_id = h->run_id;
    const char *why = NULL;
    if (make_parents(dir) != 0)
        why = "cannot create its parent directories";
    else
        dir_fd = open_own_dir(AT_FDCWD, dir, &why);
    if (dir_fd < 0) {
        spool_warn(why, errno);
        dir[0] = '\0';
        return -1;
    }
    return 0;
}

/* The file name of frame seq into out. */
static void name_of(uint64_t seq, char *out, size_t n, const char *suffix)
{
    snprintf(out, n, "%s.%016llx.%010d.%020llu.%u.slf%s", prefix, (unsigned long long)run_id,
             sl_core.world_rank, (unsigned long long)seq, (unsigned)getpid(), suffix);
}

/* Bytes of the regular files directly in the directory at (read through a
 * descriptor of its own; links and subdirectories are not followed). */
static uint64_t files_bytes(int at)
{
    int fd = openat(at, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    DIR *d = fdopendir(fd);
    if (d == NULL) {
        close(fd);
        return 0;
    }
    uint64_t total = 0;
    struct dirent *e;
    struct stat st;
    while ((e = readdir(d)) != NULL)
        if (fstatat(fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode))
            total += (uint64_t)st.st_size;
    closedir(d);
    return total;
}

/* Bytes in the spool directory and its rejected/ folder: what every process of
 * this user on this node has spooled and not yet delivered. */
static uint64_t node_bytes(void)
{
    uint64_t total = files_bytes(dir_fd);
    int rejected = openat(dir_fd, SL_REJECTED, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (rejected >= 0) {
        total += files_bytes(rejected);
        close(rejected);
    }
    return total;
}

/* Locks the spool directory against the other processes of the user (an flock
 * of a descriptor of its own, so a forked child never shares it): the node cap
 * is checked and the frame written under it. The descriptor, or -1. */
static int lock_spool(void)
{
    int fd = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0 && flock(fd, LOCK_EX) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static int write_locked(int at, const unsigned char *buf, size_t len, uint64_t seq);

/* Writes the frame to <name>.tmp in the directory at, then renames it into place.
 * The .tmp name is created exclusively, never following a link: a stale or planted
 * entry of that name is removed first (it is the process's own directory). */
static int write_frame(int at, const unsigned char *buf, size_t len, uint64_t seq)
{
    if (written + len > cap_bytes) {
        spool_warn("size cap STACKLENS_SPOOL_MAX_MB reached", 0);
        return -1;
    }
    int lock = lock_spool();
    if (lock < 0) {
        spool_warn("cannot lock the directory", errno);
        return -1;
    }
    int ok = node_bytes() + len <= node_cap_bytes;
    if (!ok)
        spool_warn("node cap STACKLENS_SPOOL_NODE_MAX_MB reached (all processes of this "
                   "user on this node together)", 0);
    else
        ok = write_locked(at, buf, len, seq) == 0;
    close(lock); /* releases the lock */
    return ok ? 0 : -1;
}

/* write_frame's writing, with the directory locked. */
static int write_locked(int at, const unsigned char *buf, size_t len, uint64_t seq)
{
    char tmp[200], final[200];
    name_of(seq, tmp, sizeof tmp, ".tmp");
    name_of(seq, final, sizeof final, "");
    int flags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
    int fd = openat(at, tmp, flags, 0600);
    if (fd < 0 && errno == EEXIST && unlinkat(at, tmp, 0) == 0)
        fd = openat(at, tmp, flags, 0600);
    if (fd < 0) {
        spool_warn("cannot write", errno);
        return -1;
    }
    size_t off = 0;
    while (off < len) {
        ssize_t n = write(fd, buf + off, len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        off += (size_t)n;
    }
    int err = errno;
    if (close(fd) != 0 || off != len || renameat(at, tmp, at, final) != 0) {
        unlinkat(at, tmp, 0);
        spool_warn("cannot write", off != len ? err : errno);
        return -1;
    }
    written += len;
    return 0;
}

/* Writes one frame into the spool directory. */
int sl_spool_write(const unsigned char *buf, size_t len, uint64_t seq)
{
    if (dir[0] == '\0' || spool_open(buf) != 0)
        return -1;
    return write_frame(dir_fd, buf, len, seq);
}

/* Deletes the file of an acknowledged frame. */
void sl_spool_remove(uint64_t seq)
{
    char final[200];
    if (dir_fd < 0)
        return;
    name_of(seq, final, sizeof final, "");
    unlinkat(dir_fd, final, 0);
}

/* Moves (or writes) a rejected frame into rejected/. */
int sl_spool_reject(const unsigned char *buf, size_t len, uint64_t seq, int spooled)
{
    if (dir[0] == '\0' || spool_open(buf) != 0)
        return -1;
    if (rejected_fd < 0) {
        const char *why = NULL;
        rejected_fd = open_own_dir(dir_fd, SL_REJECTED, &why);
        if (rejected_fd < 0) {
            spool_warn(why, errno);
            return -1;
        }
    }
    char final[200];
    name_of(seq, final, sizeof final, "");
    if (spooled && renameat(dir_fd, final, rejected_fd, final) == 0)
        return 0;
    return write_frame(rejected_fd, buf, len, seq);
}
