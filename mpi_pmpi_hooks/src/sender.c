/*
 * sender.c — the sender thread (see sender.h).
 *
 * One poll() loop on two descriptors: an eventfd that sl_sender_stop() uses
 * to wake the thread, and a non-blocking TCP socket to the collector.
 *
 *   every interval   build a delta frame and append it to the queue
 *   not connected    connect (non-blocking, 1 s timeout), next address of
 *                    the collector name on failure, backoff once all failed;
 *                    in proven mode the collector's Unix socket on this node
 *                    first, and every new connection proven before a frame
 *                    is written (proof.h: a collector that cannot prove
 *                    itself counts as unreachable, so frames are spooled)
 *   connected        write every queued frame not yet written on this
 *                    connection; read 16-byte acks; status committed removes
 *                    the frame, unavailable keeps it and reconnects after the
 *                    backoff, any other status (a rejection) is logged once
 *                    per status, moves the frame to the spool's rejected/
 *                    folder and counts it lost (frames_dropped)
 *   error            close the socket; on reconnect every unacknowledged
 *                    frame is written again (the collector drops duplicates)
 *
 * The queue holds at most SL_QUEUE_MAX_FRAMES frames and SL_QUEUE_MAX_BYTES
 * bytes (or one frame larger than that: a body may reach the wire's
 * max_body_bytes); when full the oldest frame leaves memory: if it is in the
 * spool it waits there for `stacklens replay`, otherwise it is dropped and
 * counted. The final flush builds its next frame only once the queue has
 * room for the largest one, so it never pushes out a frame of its own.
 *
 * Spool (spool.h): once the collector cannot be reached (a failed connect, a
 * lost connection), every queued frame and every new frame is also written
 * to the spool directory; an acknowledgement deletes the frame's file.
 * The final frame (of whatever type: MPI_Finalize, exit, exec, a signal,
 * MPI_Abort) and every frame still unacknowledged are spooled first, before
 * any network attempt: the process may be SIGKILLed during the live flush
 * (MPICH's Hydra proxy kills the remaining ranks as soon as one dies of a
 * signal, launchers kill the job after MPI_Abort), and what is in the spool
 * survives it; a live acknowledgement then deletes the files as usual. The
 * final frame counts its own spooling in its health record, so
 * frames_spooled counts every spooled frame.
 *
 * If the program's threads all end without exit() (main returned through
 * pthread_exit), the sender finds itself the last thread (checked every
 * SL_ALONE_CHECK_NS), delivers the final frame and ends, and with it the
 * process, as it would have ended without stacklens (see last_thread).
 *
 * Warnings go to stderr at most once per kind and rank: collector
 * unreachable or connection lost, queue overflow, each reject status.
 */
#define _GNU_SOURCE /* pthread_timedjoin_np */
#include "sender.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "fdtable.h"
#include "frame.h"
#include "ibport.h"
#include "posix.h"
#include "proof.h"
#include "snapshot.h"
#include "spool.h"

#define SL_QUEUE_MAX_FRAMES   64                /* unacknowledged frames kept in memory */
#define SL_QUEUE_MAX_BYTES    (4u << 20)        /* and their total size */
#define SL_CONNECT_TIMEOUT_NS 1000000000ull     /* one connect attempt */
#define SL_MAX_BACKOFF_NS     10000000000ull    /* longest wait between connects (or the interval) */
#define SL_FINAL_RETRY_NS     100000000ull      /* reconnect delay while flushing the final frame */
#define SL_FINAL_MAX_LOSSES   3                 /* final flush: lost connections before giving up */
#define SL_JOIN_SLACK_MS      2000u             /* join wait beyond the finalize timeout */
#define SL_NS_PER_MS          1000000ull
#define SL_ALONE_CHECK_NS     250000000ull      /* how often the sender asks if it is the last thread */
#define SL_PROOF_TIMEOUT_NS   1500000000ull     /* hello to welcome, proven mode */

/* A frame waiting for its acknowledgement. */
typedef struct sl_qframe {
    unsigned char *buf;
    size_t len;
    uint64_t seq;
    int spooled;              /* a copy is in the spool directory */
} sl_qframe;

static struct sl_sender {
    /* Set by sl_sender_start() before the thread runs, read-only afterwards. */
    const sl_config *cfg;
    int rank;
    int running;              /* atomic: a thread was started and not yet stopped */
    pthread_t thread;
    int wake_fd;              /* eventfd written by sl_sender_stop() */
    int done_fd;              /* eventfd the thread writes when it ends */
    unsigned final_requested; /* atomic: 0, or the type of the final frame asked for */
    int32_t abort_code;       /* MPI_Abort's error code, set before final_requested */

    /* Everything below belongs to the sender thread. */
    sl_frame_builder fb;
    sl_qframe q[SL_QUEUE_MAX_FRAMES]; /* oldest first */
    size_t qn;                /* frames in the queue */
    size_t qbytes;            /* bytes in the queue */
    size_t qsent;             /* q[0..qsent) are fully written on this connection */
    size_t qoff;              /* bytes of q[qsent] already written */
    int sock;                 /* -1 when not connected */
    int connecting;           /* non-blocking connect in progress */
    uint64_t connect_deadline;
    unsigned char ack[sizeof(sl_ack)];
    size_t ack_len;           /* bytes of a partial ack in ack */
    struct addrinfo *addrs;   /* resolved collector addresses, NULL until resolved */
    struct addrinfo *addr;    /* the address to try next */
    uint64_t next_retry;      /* monotonic ns before which no connect is tried */
    uint64_t backoff;         /* current retry delay, 0 after a successful ack */
    int final_phase;          /* the final frame is asked for: flushing until the deadline */
    int final_more;           /* final phase: deltas are left for more frames (body bound) */
    int give_up;              /* final phase: the collector cannot be reached */
    int final_losses;         /* final phase: connections lost since the last ack */
    int unreachable;          /* the collector could not be reached since the last ack */
    uint64_t frames_dropped;  /* frames dropped: queue full or no memory to build them */
    uint64_t frames_spooled;  /* frames written to the spool directory */
    int warned_delivery, warned_overflow, warned_unix;
    uint32_t warned_status;   /* bit per reject status already logged */
} S = { .wake_fd = -1, .done_fd = -1, .sock = -1 };

/* ---- queue ------------------------------------------------------------ */

/* Closes the connection; queued frames stay and are rewritten on the next one. */
static void conn_close(void)
{
    if (S.sock >= 0)
        close(S.sock);
    S.sock = -1;
    S.connecting = 0;
    S.qsent = 0;
    S.qoff = 0;
    S.ack_len = 0;
}

/* Removes q[i], keeping the write position of the connection consistent. */
static void queue_remove(size_t i)
{
    if (i == S.qsent && S.qoff > 0)
        conn_close(); /* half-written frame: the stream cannot continue */
    S.qbytes -= S.q[i].len;
    free(S.q[i].buf);
    memmove(&S.q[i], &S.q[i + 1], (S.qn - i - 1) * sizeof S.q[0]);
    S.qn--;
    if (i < S.qsent)
        S.qsent--;
}

/* Appends a frame, dropping the oldest frames while the queue is over its caps. */
static void queue_push(unsigned char *buf, size_t len, uint64_t seq)
{
    while (S.qn > 0 && (S.qn == SL_QUEUE_MAX_FRAMES || S.qbytes + len > SL_QUEUE_MAX_BYTES)) {
        int spooled = S.q[0].spooled;
        queue_remove(0);
        if (spooled)
            continue; /* kept on disk for `stacklens replay` */
        S.frames_dropped++;
        if (!S.warned_overflow) {
            S.warned_overflow = 1;
            sl_warn("rank %d: frame queue full (%d frames or %u bytes unacknowledged); "
                    "dropping the oldest frames, their counts are lost",
                    S.rank, SL_QUEUE_MAX_FRAMES, SL_QUEUE_MAX_BYTES);
        }
    }
    S.q[S.qn++] = (sl_qframe){ .buf = buf, .len = len, .seq = seq };
    S.qbytes += len;
}

/* Writes every queued frame not yet in the spool into it. */
static void spool_queue(void)
{
    for (size_t i = 0; i < S.qn; i++) {
        if (S.q[i].spooled)
            continue;
        if (sl_spool_write(S.q[i].buf, S.q[i].len, S.q[i].seq) != 0)
            return;
        S.q[i].spooled = 1;
        S.frames_spooled++;
    }
}

/* Builds the next interval frame and queues it (spooled while unreachable). */
static void queue_new_frame(void)
{
    size_t len;
    uint64_t seq;
    int more;
    unsigned char *buf = sl_frame_build(&S.fb, SL_FRAME_interval, 0, &len, &seq, &more);
    if (buf == NULL) {
        S.frames_dropped++;
        return;
    }
    queue_push(buf, len, seq);
    if (S.unreachable)
        spool_queue();
}

/* True if a frame of the largest size can be queued without pushing out a frame
 * that is only in memory. */
static int queue_room(void)
{
    int spooled = 1;
    for (size_t i = 0; i < S.qn; i++)
        spooled &= S.q[i].spooled;
    return spooled || (S.qn < SL_QUEUE_MAX_FRAMES
                       && S.qbytes + S.fb.scratch_size <= SL_QUEUE_MAX_BYTES);
}

/*
 * Builds the next frame of the final flush and queues it, spooled before any
 * network attempt together with every frame still unacknowledged. Deltas
 * that do not fit one frame body go first, in interval frames: it returns 1
 * while some are left (sl_frame_build), and is called again once the queue
 * has room (queue_room). A spool directory given, each frame counts its own
 * spooling in its health record: frames_spooled is raised before it is
 * built, and lowered again (in the queued copy too) if the write fails.
 */
static int queue_final_frame(unsigned frame_type, int32_t errorcode)
{
    spool_queue();
    int spool = sl_spool_dir()[0] != '\0', more;
    S.frames_spooled += (uint64_t)spool;
    size_t len;
    uint64_t seq;
    unsigned char *buf = sl_frame_build(&S.fb, frame_type, errorcode, &len, &seq, &more);
    if (buf == NULL) {
        S.frames_spooled -= (uint64_t)spool;
        S.fb.last_health[2] -= (uint64_t)spool;
        S.frames_dropped++;
        return more;
    }
    queue_push(buf, len, seq);
    if (!spool)
        return more;
    if (sl_spool_write(buf, len, seq) == 0) {
        S.q[S.qn - 1].spooled = 1;
        return more;
    }
    uint64_t counted;
    unsigned char *field = buf + S.fb.health_offset + offsetof(sl_rec_health, frames_spooled);
    memcpy(&counted, field, sizeof counted);
    counted--;
    memcpy(field, &counted, sizeof counted);
    S.frames_spooled--;
    S.fb.last_health[2]--;
    return more;
}

/* ---- connection ------------------------------------------------------- */

/* Warns once per rank that frames cannot be delivered right now. */
static void warn_delivery(const char *what, int err)
{
    if (S.warned_delivery)
        return;
    S.warned_delivery = 1;
    const char *spool = sl_spool_dir();
    sl_warn("rank %d: collector %s:%s: %s%s%s; %s%s%s", S.rank, S.cfg->collector_host,
            S.cfg->collector_port, what, err ? ": " : "", err ? strerror(err) : "",
            spool[0] ? "frames are resent on reconnect and spooled to " : "",
            spool[0] ? spool : "counts are resent on reconnect, and lost if it is still "
                               "unreachable at the end (no spool directory)",
            spool[0] ? " (deliver later with `stacklens replay`)" : "");
}

/* Schedules the next connect after a doubling delay: interval, 2x, 4x, ... up to 10 s. */
static void retry_later(uint64_t now)
{
    uint64_t interval = (uint64_t)S.cfg->interval_ms * SL_NS_PER_MS;
    uint64_t cap = interval > SL_MAX_BACKOFF_NS ? interval : SL_MAX_BACKOFF_NS;
    S.backoff = S.backoff == 0 ? interval : 2 * S.backoff;
    if (S.backoff > cap)
        S.backoff = cap;
    S.next_retry = now + S.backoff;
}

/*
 * Handles a failed connect to S.addr: the next address of the collector is
 * tried at once; when all have failed, the next try waits for the backoff
 * (or, in the final phase, the flush gives up).
 */
static void connect_failed(uint64_t now, const char *what, int err)
{
    conn_close();
    int tried_all = S.addr == NULL || S.addr->ai_next == NULL;
    S.addr = tried_all ? S.addrs : S.addr->ai_next;
    if (!tried_all) {
        S.next_retry = now;
        return;
    }
    if (S.final_phase)
        S.give_up = 1;
    else
        retry_later(now);
    S.unreachable = 1;
    spool_queue();
    warn_delivery(what, err);
}

/*
 * Handles the loss of an established connection: reconnect after the
 * backoff (in the final phase after a short delay, giving up after a few
 * losses in a row without an acknowledgement).
 */
static void connection_lost(uint64_t now, const char *what, int err)
{
    conn_close();
    S.unreachable = 1;
    spool_queue();
    if (S.final_phase) {
        S.next_retry = now + SL_FINAL_RETRY_NS;
        S.give_up = ++S.final_losses >= SL_FINAL_MAX_LOSSES;
        return;
    }
    retry_later(now);
    warn_delivery(what, err);
}

/*
 * Proven mode, at the start of a round of connects: the collector's Unix
 * socket on this node, proven (proof.h). Returns 0 when connected and proven;
 * -1 when there is no socket to connect to or it is not the collector (once
 * warned): TCP is tried instead.
 */
static int unix_connect(uint64_t now)
{
    if (S.cfg->trusted || S.cfg->collector_socket[0] == '\0' || S.addr != S.addrs)
        return -1;
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    memcpy(sa.sun_path, S.cfg->collector_socket, sizeof sa.sun_path - 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -1;
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        close(fd); /* no collector socket on this node (or its backlog is full) */
        return -1;
    }
    char why[256];
    if (sl_proof_connect(S.cfg, fd, 1, now + SL_PROOF_TIMEOUT_NS, why, sizeof why) != 0) {
        close(fd);
        if (!S.warned_unix) {
            S.warned_unix = 1;
            sl_warn("rank %d: collector socket %s: %s; not sending there", S.rank,
                    S.cfg->collector_socket, why);
        }
        return -1;
    }
    S.sock = fd;
    return 0;
}

/* Proven mode: proves a connection just established over TCP before a frame is
 * written on it; a collector that does not prove itself is a failed connect. */
static void connection_prove(uint64_t now)
{
    char why[256];
    if (S.cfg->trusted
        || sl_proof_connect(S.cfg, S.sock, 0, now + SL_PROOF_TIMEOUT_NS, why, sizeof why) == 0)
        return;
    connect_failed(sl_mono_ns(), why, 0);
}

/* Resolves the collector address if needed and starts a non-blocking connect. */
static void connect_start(uint64_t now)
{
    if (unix_connect(now) == 0)
        return;
    if (S.addrs == NULL) {
        struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV };
        int rc = getaddrinfo(S.cfg->collector_host, S.cfg->collector_port, &hints, &S.addrs);
        if (rc != 0) {
            S.addrs = NULL;
            S.addr = NULL;
            connect_failed(now, gai_strerror(rc), 0);
            return;
        }
        S.addr = S.addrs;
    }
    S.sock = socket(S.addr->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (S.sock < 0) {
        connect_failed(now, "cannot create a socket", errno);
        return;
    }
    int one = 1;
    setsockopt(S.sock, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(S.sock, S.addr->ai_addr, S.addr->ai_addrlen) == 0) {
        connection_prove(now);
        return;
    }
    if (errno == EINPROGRESS) {
        S.connecting = 1;
        S.connect_deadline = now + SL_CONNECT_TIMEOUT_NS;
        return;
    }
    connect_failed(now, "cannot connect", errno);
}

/* Completes a non-blocking connect once poll() reports the socket. */
static void connect_finish(uint64_t now)
{
    int err = 0;
    socklen_t len = sizeof err;
    if (getsockopt(S.sock, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
        err = errno;
    if (err != 0) {
        connect_failed(now, "cannot connect", err);
        return;
    }
    S.connecting = 0;
    connection_prove(now);
}

/* Writes queued frames not yet written on this connection, as far as the socket takes them. */
static void frames_write(uint64_t now)
{
    while (S.sock >= 0 && S.qsent < S.qn) {
        const sl_qframe *f = &S.q[S.qsent];
        ssize_t n = send(S.sock, f->buf + S.qoff, f->len - S.qoff, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            S.qoff += (size_t)n;
            if (S.qoff == f->len) {
                S.qsent++;
                S.qoff = 0;
            }
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            return;
        } else {
            connection_lost(now, "connection lost", n < 0 ? errno : 0);
            return;
        }
    }
}

/* Applies one complete acknowledgement from S.ack. */
static void ack_apply(uint64_t now)
{
    sl_ack a;
    memcpy(&a, S.ack, sizeof a);
    if (a.magic != SL_ACK_MAGIC) {
        connection_lost(now, "bad acknowledgement from the collector", 0);
        return;
    }
    size_t i = 0;
    while (i < S.qsent && S.q[i].seq != a.seq)
        i++;
    if (i == S.qsent)
        return; /* not a frame in flight: an ack we no longer wait for */
    if (a.status == SL_STATUS_committed) {
        if (S.q[i].spooled)
            sl_spool_remove(S.q[i].seq);
        queue_remove(i);
        S.backoff = 0;
        S.final_losses = 0;
        S.unreachable = 0;
    } else if (a.status == SL_STATUS_unavailable) {
        /* The frame stays queued and is resent on a new connection after the backoff. */
        connection_lost(now, "answered status unavailable", 0);
    } else {
        /* Rejected: kept in the spool's rejected/ folder, counted lost, never resent. */
        int kept = sl_spool_reject(S.q[i].buf, S.q[i].len, S.q[i].seq, S.q[i].spooled) == 0;
        uint32_t bit = a.status < 32 ? 1u << a.status : 1u << 31;
        if (!(S.warned_status & bit)) {
            S.warned_status |= bit;
            sl_warn("rank %d: collector rejected frame %llu: status %u (%s); frame %s%s",
                    S.rank, (unsigned long long)a.seq, (unsigned)a.status,
                    sl_status_name(a.status), kept ? "kept in " : "lost (no spool directory)",
                    kept ? sl_spool_dir() : "");
        }
        S.frames_dropped++;
        sl_frame_recredit(&S.fb, S.q[i].buf, S.q[i].len);
        queue_remove(i);
    }
}

/* Reads and applies every acknowledgement the socket has. */
static void acks_read(uint64_t now)
{
    while (S.sock >= 0) {
        ssize_t n = recv(S.sock, S.ack + S.ack_len, sizeof S.ack - S.ack_len, MSG_DONTWAIT);
        if (n > 0) {
            S.ack_len += (size_t)n;
            if (S.ack_len == sizeof S.ack) {
                S.ack_len = 0;
                ack_apply(now);
            }
        } else if (n == 0) {
            if (S.qsent == 0 && S.qoff == 0)
                conn_close(); /* nothing in flight: an idle close, reconnect when needed */
            else
                connection_lost(now, "connection closed by the collector", 0);
            return;
        } else if (errno == EINTR) {
            continue;
        } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
            return;
        } else {
            connection_lost(now, "connection lost", errno);
            return;
        }
    }
}

/* ---- thread ----------------------------------------------------------- */

/* Milliseconds from now until deadline for poll(), rounded up, at least 0. */
static int poll_timeout_ms(uint64_t now, uint64_t deadline)
{
    if (deadline <= now)
        return 0;
    uint64_t ms = (deadline - now + SL_NS_PER_MS - 1) / SL_NS_PER_MS;
    return ms > 60000 ? 60000 : (int)ms;
}

/* Live threads of this process, or -1 if unknown: field 20 of /proc/self/stat
 * less the main thread if it has ended (field 3, the state of the thread
 * group leader, is Z while the other threads live on). */
static long live_threads(void)
{
    char buf[1024];
    int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    char *p = strrchr(buf, ')'); /* the command name may hold spaces and parentheses */
    if (p == NULL || p[1] != ' ')
        return -1;
    int main_ended = p[2] == 'Z';
    for (int field = 2; p != NULL && field < 20; field++)
        p = strchr(p + 1, ' ');
    return p != NULL ? strtol(p + 1, NULL, 10) - main_ended : -1;
}

/*
 * True once the sender is the last thread of the process: the program's
 * threads have all ended without exit() (the main thread returned through
 * pthread_exit). Without stacklens the process would have ended with status
 * 0 when its last thread did, so the sender takes its part: it marks itself
 * stopped (the destructors then run on it and must not join it), delivers
 * the final frame and returns, and glibc ends the process as for any last
 * thread (exit(0): atexit handlers and destructors).
 */
static int last_thread(void)
{
    int running = 1;
    return live_threads() == 1
           && __atomic_compare_exchange_n(&S.running, &running, 0, 0, __ATOMIC_ACQ_REL,
                                          __ATOMIC_ACQUIRE);
}

/* Body of the sender thread: the loop described at the top of this file. */
static void *sender_main(void *arg)
{
    (void)arg;
    sl_tls_in_call = 1; /* this thread's own I/O (spool files) is not the application's */
    int shared[2] = { S.wake_fd, S.done_fd }; /* written and polled by the application's threads */
    sl_fdtable_private(shared, 2); /* a descriptor table of its own (fdtable.h) */
    sl_ibport_start();  /* baseline of the host's port counters, read here, not on MPI paths */
    uint64_t interval = (uint64_t)S.cfg->interval_ms * SL_NS_PER_MS;
    uint64_t next_tick = sl_mono_ns() + interval;
    uint64_t final_deadline = 0;
    uint64_t next_alone_check = sl_mono_ns() + SL_ALONE_CHECK_NS;
    uint64_t next_snapshot = 0; /* the first one at once: a rank may die before 100 ms */

    for (;;) {
        uint64_t now = sl_mono_ns();
        if (!S.final_phase && now >= next_snapshot) {
            sl_snapshot_write(&S.fb);
            next_snapshot = now + SL_SNAPSHOT_NS;
        }
        if (!S.final_phase && now >= next_alone_check) {
            next_alone_check = now + SL_ALONE_CHECK_NS;
            if (last_thread())
                __atomic_store_n(&S.final_requested, SL_FRAME_final, __ATOMIC_RELEASE);
        }
        unsigned final_type = __atomic_load_n(&S.final_requested, __ATOMIC_ACQUIRE);
        if (!S.final_phase && final_type != 0) {
            S.final_phase = S.final_more = 1;
            final_deadline = now + (uint64_t)S.cfg->finalize_timeout_ms * SL_NS_PER_MS;
            S.next_retry = now; /* try the collector once more right away */
        } else if (!S.final_phase && now >= next_tick) {
            queue_new_frame();
            next_tick += interval;
            if (next_tick <= now) /* the thread was held up: skip missed ticks */
                next_tick = now + interval;
        }
        while (S.final_phase && S.final_more && queue_room())
            S.final_more = queue_final_frame(final_type, S.abort_code);
        if (S.final_phase && ((S.qn == 0 && !S.final_more) || S.give_up || now >= final_deadline))
            break;

        if (S.sock < 0 && S.qn > 0 && now >= S.next_retry)
            connect_start(now);
        if (S.sock >= 0 && !S.connecting)
            frames_write(now);

        uint64_t deadline = S.final_phase ? final_deadline : next_tick;
        if (!S.final_phase && next_alone_check < deadline)
            deadline = next_alone_check;
        if (!S.final_phase && sl_snapshot_active() && next_snapshot < deadline)
            deadline = next_snapshot;
        if (S.sock < 0 && S.qn > 0 && S.next_retry < deadline)
            deadline = S.next_retry;
        if (S.connecting && S.connect_deadline < deadline)
            deadline = S.connect_deadline;
        struct pollfd pfd[2] = { { .fd = S.wake_fd, .events = POLLIN } };
        nfds_t nfds = 1;
        if (S.sock >= 0) {
            pfd[1].fd = S.sock;
            if (S.connecting)
                pfd[1].events = POLLOUT;
            else
                pfd[1].events = (short)(POLLIN | (S.qsent < S.qn ? POLLOUT : 0));
            nfds = 2;
        }
        if (poll(pfd, nfds, poll_timeout_ms(now, deadline)) < 0)
            continue; /* EINTR */
        now = sl_mono_ns();

        if (pfd[0].revents & POLLIN) {
            uint64_t drained;
            ssize_t rc = read(S.wake_fd, &drained, sizeof drained);
            (void)rc; /* only the wake-up matters */
        }
        if (nfds == 2 && S.connecting) {
            if (pfd[1].revents != 0)
                connect_finish(now);
            else if (now >= S.connect_deadline)
                connect_failed(now, "cannot connect", ETIMEDOUT);
        } else if (nfds == 2) {
            if (pfd[1].revents & (POLLIN | POLLERR | POLLHUP))
                acks_read(now);
            if (S.sock >= 0 && (pfd[1].revents & POLLOUT))
                frames_write(now);
        }
    }

    if (S.qn > 0) {
        S.unreachable = 1;
        spool_queue(); /* what is still unacknowledged survives in the spool */
    }
    size_t unspooled = 0;
    for (size_t i = 0; i < S.qn; i++)
        unspooled += !S.q[i].spooled;
    if (unspooled == 0 && !S.final_more)
        sl_snapshot_remove(); /* the final frame is delivered or spooled */
    if (unspooled > 0 && !S.warned_delivery) {
        if (S.give_up)
            sl_warn("rank %d: the collector closed the connection %d times without "
                    "acknowledging; the counts of %zu frame(s) are lost",
                    S.rank, SL_FINAL_MAX_LOSSES, unspooled);
        else
            sl_warn("rank %d: %zu frame(s) not acknowledged by the collector within "
                    "STACKLENS_FINALIZE_TIMEOUT_MS=%u; their counts are lost",
                    S.rank, unspooled, S.cfg->finalize_timeout_ms);
    } else if (S.qn > 0 && !S.warned_delivery) { /* all spooled (SIGTERM spools first) */
        sl_warn("rank %d: %zu frame(s) not acknowledged by the collector within "
                "STACKLENS_FINALIZE_TIMEOUT_MS=%u; they wait in %s for `stacklens replay`",
                S.rank, S.qn, S.cfg->finalize_timeout_ms, sl_spool_dir());
    }
    if (S.frames_dropped > 0)
        sl_warn("rank %d: %llu frame(s) were dropped in all (queue full or out of memory)",
                S.rank, (unsigned long long)S.frames_dropped);
    conn_close();
    while (S.qn > 0)
        queue_remove(S.qn - 1);
    if (S.addrs != NULL)
        freeaddrinfo(S.addrs);
    S.addrs = NULL;
    uint64_t one = 1;
    ssize_t wrc = write(S.done_fd, &one, sizeof one);
    (void)wrc; /* wakes sl_sender_flush_from_signal(), if it waits */
    return NULL;
}

/* Closes the two eventfds of the thread (after it ended, or if it never started). */
static void close_fds(void)
{
    if (S.wake_fd >= 0)
        close(S.wake_fd);
    if (S.done_fd >= 0)
        close(S.done_fd);
    S.wake_fd = S.done_fd = -1;
}

/* Starts the thread with every signal blocked, so that the application's signal
 * handlers always run on its own threads; 0 or an errno value. */
static int thread_start(void)
{
    S.final_phase = S.final_more = S.give_up = S.final_losses = 0;
    __atomic_store_n(&S.final_requested, 0, __ATOMIC_RELEASE);
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = sl_own_thread_create(&S.thread, sender_main);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc == 0)
        __atomic_store_n(&S.running, 1, __ATOMIC_RELEASE);
    return rc;
}

/* Prepares the frame builder and the two eventfds, then starts the thread. */
int sl_sender_start(const sl_config *cfg, const sl_identity *id)
{
    S.cfg = cfg;
    S.rank = sl_core.world_rank;
    if (cfg->send_disabled)
        return -1; /* sl_config_load said why */
    if (sl_frame_builder_init(&S.fb, id, cfg->token) != 0) {
        sl_warn("rank %d: no memory for frames; stacklens is off", S.rank);
        return -1;
    }
    sl_spool_init(cfg->spool_dir, cfg->spool_max_mb, cfg->spool_node_max_mb);
    sl_snapshot_open(id);
    S.fb.frames_dropped = &S.frames_dropped;
    S.fb.frames_spooled = &S.frames_spooled;
    S.wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    S.done_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    sl_fdtable_probe(); /* on this thread, not the sender's (fdtable.h) */
    int rc = S.wake_fd < 0 || S.done_fd < 0 ? errno : thread_start();
    if (rc != 0) {
        sl_warn("rank %d: cannot start the sender thread: %s; stacklens is off",
                S.rank, strerror(rc));
        close_fds();
        sl_frame_builder_fini(&S.fb);
        return -1;
    }
    return 0;
}

/* Requests the final frame and joins the thread within the finalize timeout. */
int sl_sender_end(unsigned frame_type, int32_t errorcode)
{
    if (!__atomic_exchange_n(&S.running, 0, __ATOMIC_ACQ_REL))
        return 1;
    S.abort_code = errorcode;
    __atomic_store_n(&S.final_requested, frame_type, __ATOMIC_RELEASE);
    uint64_t one = 1;
    ssize_t wrc = write(S.wake_fd, &one, sizeof one);
    (void)wrc; /* an eventfd write of 1 cannot fail short of overflow */

    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    uint64_t wait_ms = (uint64_t)S.cfg->finalize_timeout_ms + SL_JOIN_SLACK_MS;
    until.tv_sec += (time_t)(wait_ms / 1000);
    until.tv_nsec += (long)(wait_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    if (pthread_timedjoin_np(S.thread, NULL, &until) != 0) {
        sl_warn("rank %d: the sender thread did not stop in time; leaving it", S.rank);
        pthread_detach(S.thread);
        return 0;
    }
    uint64_t drained;
    ssize_t rrc = read(S.done_fd, &drained, sizeof drained);
    (void)rrc; /* the thread's "done": a restarted thread must not look done */
    return 1;
}

/* Starts the thread again after sl_sender_end: same builder, sequence and spool. */
int sl_sender_restart(void)
{
    if (S.wake_fd < 0 || __atomic_load_n(&S.running, __ATOMIC_ACQUIRE))
        return -1;
    int rc = thread_start();
    if (rc != 0)
        sl_warn("rank %d: cannot restart the sender thread: %s; counting stops",
                S.rank, strerror(rc));
    return rc == 0 ? 0 : -1;
}

/* Frees the builder and closes the eventfds of an ended thread. */
void sl_sender_release(void)
{
    close_fds();
    sl_frame_builder_fini(&S.fb);
}

/* Async-signal-safe: the final frame of type frame_type requested (spooled
 * first) by an atomic store and an eventfd write, then a bounded poll() on
 * the thread's "done" eventfd. */
static void flush_and_wait(unsigned frame_type)
{
    if (!__atomic_load_n(&S.running, __ATOMIC_ACQUIRE))
        return;
    __atomic_store_n(&S.final_requested, frame_type, __ATOMIC_RELEASE);
    uint64_t one = 1;
    ssize_t wrc = write(S.wake_fd, &one, sizeof one);
    (void)wrc;
    uint64_t deadline = sl_mono_ns()
                        + ((uint64_t)S.cfg->finalize_timeout_ms + SL_JOIN_SLACK_MS) * SL_NS_PER_MS;
    struct pollfd pfd = { .fd = S.done_fd, .events = POLLIN };
    for (uint64_t now = sl_mono_ns(); now < deadline; now = sl_mono_ns()) {
        int rc = poll(&pfd, 1, poll_timeout_ms(now, deadline));
        if (rc > 0 || (rc < 0 && errno != EINTR))
            return; /* done, or an error: never wait for more than the deadline */
    }
}

/* The final frame of a rank ended by a signal. */
void sl_sender_flush_from_signal(void)
{
    flush_and_wait(SL_FRAME_killed);
}

/* The final frame (of frame_type) of a process ending by _exit(). */
void sl_sender_flush_at_exit(unsigned frame_type)
{
    flush_and_wait(frame_type);
}
