/*
 * proof.c — proven mode of the sender's connection (see proof.h).
 *
 * libmunge is resolved once (dlopen "libmunge.so.2", five symbols); the
 * prototypes come from munge.h (libmunge-dev), the library only at run time.
 */
#define _GNU_SOURCE /* struct ucred */
#include "proof.h"

#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <munge.h>

#include "stacklens_wire.h"
#include "util.h"

/* ---- libmunge, loaded on first use ------------------------------------ */

static struct {
    int loaded;               /* 1 = the symbols below are set, -1 = not available */
    char error[160];          /* why not, when loaded is -1 */
    munge_ctx_t (*ctx_create)(void);
    void (*ctx_destroy)(munge_ctx_t);
    munge_err_t (*ctx_set)(munge_ctx_t, int, ...);
    munge_err_t (*encode)(char **, munge_ctx_t, const void *, int);
    munge_err_t (*decode)(const char *, munge_ctx_t, void **, int *, uid_t *, gid_t *);
    const char *(*strerror)(munge_err_t);
} M;

/* Loads libmunge once (sender thread only); 0, or -1 with the reason in M.error. */
static int munge_load(void)
{
    if (M.loaded != 0)
        return M.loaded > 0 ? 0 : -1;
    void *lib = dlopen("libmunge.so.2", RTLD_NOW | RTLD_LOCAL);
    if (lib != NULL) {
        *(void **)&M.ctx_create = dlsym(lib, "munge_ctx_create");
        *(void **)&M.ctx_destroy = dlsym(lib, "munge_ctx_destroy");
        *(void **)&M.ctx_set = dlsym(lib, "munge_ctx_set");
        *(void **)&M.encode = dlsym(lib, "munge_encode");
        *(void **)&M.decode = dlsym(lib, "munge_decode");
        *(void **)&M.strerror = dlsym(lib, "munge_strerror");
    }
    if (lib == NULL || !M.ctx_create || !M.ctx_destroy || !M.ctx_set || !M.encode
        || !M.decode || !M.strerror) {
        const char *err = dlerror();
        snprintf(M.error, sizeof M.error, "libmunge is not available (%s): install MUNGE or "
                 "use the collector's Unix socket", err ? err : "symbols missing");
        M.loaded = -1;
        return -1;
    }
    M.loaded = 1;
    return 0;
}

/* A munge context using the configured munged socket, or NULL. */
static munge_ctx_t munge_context(const sl_config *cfg)
{
    munge_ctx_t ctx = M.ctx_create();
    if (ctx != NULL && cfg->munge_socket[0] != '\0'
        && M.ctx_set(ctx, MUNGE_OPT_SOCKET, cfg->munge_socket) != EMUNGE_SUCCESS) {
        M.ctx_destroy(ctx);
        return NULL;
    }
    return ctx;
}

/* ---- the collector user ----------------------------------------------- */

/* Whether uid is the collector user: STACKLENS_COLLECTOR_USER (a uid, or a
 * name looked up here, on the sender thread), else root or our own user. */
static int collector_uid_ok(const sl_config *cfg, uid_t uid, char *why, size_t why_size)
{
    const char *want = cfg->collector_user;
    if (want[0] == '\0') {
        if (uid == 0 || uid == geteuid())
            return 1;
        snprintf(why, why_size, "the collector runs as uid %u, neither root nor us "
                 "(set STACKLENS_COLLECTOR_USER if it is the real one)", (unsigned)uid);
        return 0;
    }
    char *end;
    unsigned long n = strtoul(want, &end, 10);
    if (*end != '\0' || end == want) {
        struct passwd pw, *found = NULL;
        char buf[1024];
        if (getpwnam_r(want, &pw, buf, sizeof buf, &found) != 0 || found == NULL) {
            snprintf(why, why_size, "STACKLENS_COLLECTOR_USER=%s: no such user", want);
            return 0;
        }
        n = found->pw_uid;
    }
    if (uid == (uid_t)n)
        return 1;
    snprintf(why, why_size, "the collector runs as uid %u, not as STACKLENS_COLLECTOR_USER=%s",
             (unsigned)uid, want);
    return 0;
}

/* ---- bounded I/O on the non-blocking socket ---------------------------- */

/* Writes or reads all len bytes before the deadline; 0, or -1 with why set. */
static int io_all(int fd, void *buf, size_t len, int writing, uint64_t deadline,
                  char *why, size_t why_size)
{
    size_t done = 0;
    while (done < len) {
        ssize_t n = writing ? send(fd, (char *)buf + done, len - done, MSG_NOSIGNAL)
                            : recv(fd, (char *)buf + done, len - done, 0);
        if (n > 0) {
            done += (size_t)n;
            continue;
        }
        if (n == 0) {
            snprintf(why, why_size, "the collector closed the connection during the hello");
            return -1;
        }
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) {
            snprintf(why, why_size, "hello: %s", strerror(errno));
            return -1;
        }
        uint64_t now = sl_mono_ns();
        if (now >= deadline) {
            snprintf(why, why_size, "no welcome from the collector in time");
            return -1;
        }
        struct pollfd p = { .fd = fd, .events = writing ? POLLOUT : POLLIN };
        poll(&p, 1, (int)((deadline - now) / 1000000u) + 1);
    }
    return 0;
}

/* ---- the proof ---------------------------------------------------------- */

/* Reads a welcome; 0, or -1 with why set (not a welcome, or a refusal). */
static int welcome_read(int fd, sl_welcome *w, uint64_t deadline, char *why, size_t why_size)
{
    if (io_all(fd, w, sizeof *w, 0, deadline, why, why_size) != 0)
        return -1;
    if (w->magic != SL_WELCOME_MAGIC) {
        snprintf(why, why_size, "the peer did not answer with a welcome: not a collector in "
                 "proven mode (STACKLENS_INGEST_AUTH)");
        return -1;
    }
    if (w->status != SL_STATUS_committed) {
        snprintf(why, why_size, "the collector refused us: status %u (%s)", (unsigned)w->status,
                 sl_status_name(w->status));
        return -1;
    }
    return 0;
}

/* TCP: the challenge is proven (the collector user's credential for our
 * nonce), then our credential for its nonce goes out; 0 or -1 with why. */
static int munge_exchange(const sl_config *cfg, int fd, const unsigned char nonce[16],
                          uint64_t deadline, char *why, size_t why_size)
{
    sl_welcome w;
    if (welcome_read(fd, &w, deadline, why, why_size) != 0)
        return -1;
    if (w.cred_len == 0 || w.cred_len > SL_BOUND_max_cred_bytes) {
        snprintf(why, why_size, "the collector did not prove itself (no credential)");
        return -1;
    }
    char answer[SL_BOUND_max_cred_bytes + 1];
    if (io_all(fd, answer, w.cred_len, 0, deadline, why, why_size) != 0)
        return -1;
    answer[w.cred_len] = '\0';
    if (munge_load() != 0) {
        snprintf(why, why_size, "%s", M.error);
        return -1;
    }
    munge_ctx_t ctx = munge_context(cfg);
    if (ctx == NULL) {
        snprintf(why, why_size, "MUNGE: cannot use the socket %s", cfg->munge_socket);
        return -1;
    }
    int rc = -1;
    void *payload = NULL;
    int payload_len = 0;
    uid_t uid;
    gid_t gid;
    char *cred = NULL;
    munge_err_t e = M.decode(answer, ctx, &payload, &payload_len, &uid, &gid);
    int same = e == EMUNGE_SUCCESS && payload_len == 16 && memcmp(payload, nonce, 16) == 0;
    free(payload);
    if (e != EMUNGE_SUCCESS) {
        snprintf(why, why_size, "the collector's credential is not valid: %s", M.strerror(e));
        goto out;
    }
    if (!same) {
        snprintf(why, why_size, "the collector's credential was not made for this connection");
        goto out;
    }
    if (!collector_uid_ok(cfg, uid, why, why_size))
        goto out;
    unsigned char theirs[16];
    memcpy(theirs, &w.nonce0, 8);
    memcpy(theirs + 8, &w.nonce1, 8);
    e = M.encode(&cred, ctx, theirs, (int)sizeof theirs);
    if (e != EMUNGE_SUCCESS || strlen(cred) == 0 || strlen(cred) > SL_BOUND_max_cred_bytes) {
        snprintf(why, why_size, "MUNGE credential: %s",
                 e != EMUNGE_SUCCESS ? M.strerror(e) : "bad length");
        goto out;
    }
    sl_cred msg = { .magic = SL_CRED_MAGIC, .cred_len = (uint32_t)strlen(cred) };
    if (io_all(fd, &msg, sizeof msg, 1, deadline, why, why_size) == 0
        && io_all(fd, cred, msg.cred_len, 1, deadline, why, why_size) == 0)
        rc = 0;
out:
    free(cred);
    M.ctx_destroy(ctx);
    return rc;
}

int sl_proof_connect(const sl_config *cfg, int fd, int unix_socket, uint64_t deadline,
                     char *why, size_t why_size)
{
    sl_hello hello = { .magic = SL_HELLO_MAGIC, .owner_uid = (uint32_t)geteuid(),
                       .proof = unix_socket ? SL_PROOF_peer : SL_PROOF_munge };
    unsigned char nonce[16];
    if (getrandom(nonce, sizeof nonce, 0) != (ssize_t)sizeof nonce) {
        snprintf(why, why_size, "no random nonce: %s", strerror(errno));
        return -1;
    }
    memcpy(&hello.nonce0, nonce, 8);
    memcpy(&hello.nonce1, nonce + 8, 8);
    if (unix_socket) {
        struct ucred peer;
        socklen_t len = sizeof peer;
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &len) != 0) {
            snprintf(why, why_size, "cannot read the socket's peer: %s", strerror(errno));
            return -1;
        }
        if (!collector_uid_ok(cfg, peer.uid, why, why_size))
            return -1;
    }
    if (io_all(fd, &hello, sizeof hello, 1, deadline, why, why_size) != 0)
        return -1;
    if (!unix_socket && munge_exchange(cfg, fd, nonce, deadline, why, why_size) != 0)
        return -1;
    sl_welcome final;
    return welcome_read(fd, &final, deadline, why, why_size);
}
