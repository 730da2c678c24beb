/*
 * spool.c — frames to and from the spool directory (see spool.h).
 */
#include "spool.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core.h"
#include "stacklens_wire.h"
#include "util.h"

static char dir[512];
static char prefix[sizeof(((sl_frame_header *)0)->job_id) + 1]; /* sanitised job id */
static uint64_t run_id; /* of the frames spooled, from the first one's header */
static uint64_t cap_bytes, written;
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

/* mkdir -p of path (mode 0700 for the directories it creates); 0 or -1 with errno. */
static int make_dirs(const char *path)
{
    char buf[sizeof dir];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; ; p++) {
        if (*p == '/' || *p == '\0') {
            char c = *p;
            *p = '\0';
            if (mkdir(buf, 0700) != 0 && errno != EEXIST)
                return -1;
            if (c == '\0')
                return 0;
            *p = c;
        }
    }
}

/* Records the directory and cap; the job id comes with the first frame. */
void sl_spool_init(const char *path, unsigned max_mb)
{
    snprintf(dir, sizeof dir, "%s", path);
    cap_bytes = (uint64_t)max_mb << 20;
    written = 0;
    prefix[0] = '\0';
}

/* The spool directory. */
const char *sl_spool_dir(void)
{
    return dir;
}

/* The file name of frame seq into out. */
static void name_of(uint64_t seq, char *out, size_t n, const char *suffix)
{
    snprintf(out, n, "%s/%s.%016llx.%010d.%020llu.%u.slf%s", dir, prefix,
             (unsigned long long)run_id, sl_core.world_rank, (unsigned long long)seq,
             (unsigned)getpid(), suffix);
}

/* Writes the frame to <name>.tmp and renames it into place. */
int sl_spool_write(const unsigned char *buf, size_t len, uint64_t seq)
{
    if (dir[0] == '\0')
        return -1;
    if (written + len > cap_bytes) {
        spool_warn("size cap STACKLENS_SPOOL_MAX_MB reached", 0);
        return -1;
    }
    if (prefix[0] == '\0') {
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
        if (make_dirs(dir) != 0) {
            spool_warn("cannot create the directory", errno);
            dir[0] = '\0';
            return -1;
        }
    }
    char tmp[700], final[700];
    name_of(seq, tmp, sizeof tmp, ".tmp");
    name_of(seq, final, sizeof final, "");
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
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
    if (close(fd) != 0 || off != len || rename(tmp, final) != 0) {
        unlink(tmp);
        spool_warn("cannot write", off != len ? err : errno);
        return -1;
    }
    written += len;
    return 0;
}

/* Deletes the file of an acknowledged frame. */
void sl_spool_remove(uint64_t seq)
{
    char final[700];
    if (dir[0] == '\0')
        return;
    name_of(seq, final, sizeof final, "");
    unlink(final);
}
