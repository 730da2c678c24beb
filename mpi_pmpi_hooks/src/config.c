/*
 * config.c — reads the STACKLENS_* environment variables (see config.h), each one
 * declared in contract/stacklens_settings.def (defaults and meanings there too):
 *
 *   STACKLENS_COLLECTOR            host:port or [v6addr]:port, default 127.0.0.1:7451;
 *                                  malformed = a warning and nothing is sent (never
 *                                  the default address in its place)
 *   STACKLENS_INTERVAL_MS          frame interval, default 1000, minimum 10
 *   STACKLENS_INGEST_TOKEN         ingest token, at most 64 visible ASCII characters
 *                                  (0x21-0x7E), default empty; otherwise a warning
 *                                  (never showing the value) and nothing is sent
 *   STACKLENS_FINALIZE_TIMEOUT_MS  wait for acks in MPI_Finalize, default 5000
 *   STACKLENS_DISABLE              comma list of mpi, posix, stdio, mpiio: those
 *                                  wrappers only forward; processes: programs
 *                                  without MPI send nothing
 *   STACKLENS_MAX_KEYS             files / communicators / collective keys per
 *                                  table, default 1024 (16 .. 1048576)
 *   STACKLENS_SPOOL_DIR            spool for undeliverable frames, default (per
 *                                  user) ${TMPDIR:-/tmp}/stacklens-spool-<uid>,
 *                                  as stacklens/settings.py ("" or "off": none)
 *   STACKLENS_SPOOL_MAX_MB         spool size cap per process, default 256
 *   STACKLENS_SPOOL_NODE_MAX_MB    spool size cap of the directory (every process
 *                                  of the user on the node), default 1024
 *   STACKLENS_INGEST_AUTH          proven (default: every connection proves who
 *                                  sends and that the collector is the real one,
 *                                  see proof.h) or trusted (no proof, the token)
 *   STACKLENS_COLLECTOR_SOCKET     the collector's Unix socket on this node, tried
 *                                  before TCP; default /run/stacklens/ingest.sock,
 *                                  "off": none
 *   STACKLENS_COLLECTOR_USER       user (name or uid) the collector must be proven
 *                                  to run as; default: root or our own user
 *   STACKLENS_MUNGE_SOCKET         the local munged's socket, default libmunge's
 *
 * A renamed setting (SL_RENAMED) is still read under its old name when the new one is
 * unset, with one warning per process naming the new one (sl_env).
 */
#define _GNU_SOURCE
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <strings.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util.h"

#define SL_DEFAULT_HOST          "127.0.0.1"
#define SL_DEFAULT_PORT          "7451"
#define SL_DEFAULT_INTERVAL_MS   1000u
#define SL_MIN_INTERVAL_MS       10u
#define SL_MAX_INTERVAL_MS       3600000u
#define SL_DEFAULT_FIN_TIMEOUT   5000u
#define SL_MAX_FIN_TIMEOUT       600000u
#define SL_DEFAULT_MAX_KEYS      1024u
#define SL_MIN_MAX_KEYS          16u
#define SL_MAX_MAX_KEYS          1048576u
#define SL_DEFAULT_SITE_DEPTH    1u
#define SL_DEFAULT_MAX_SITES     256u
#define SL_MAX_MAX_SITES         65536u
#define SL_DEFAULT_SPOOL_MB      256u
#define SL_DEFAULT_NODE_SPOOL_MB 1024u
#define SL_MAX_SPOOL_MB          1048576u
#define SL_DEFAULT_SOCKET        "/run/stacklens/ingest.sock"

/* The variable names of the declared settings, by sl_setting. */
static const char *const setting_names[SL_SET_COUNT] = {
#define SL_SETTING(name, readers, dflt, meaning) [SL_SET_##name] = "STACKLENS_" #name,
#define SL_RENAMED(old, name)
#include "stacklens_settings.def"
#undef SL_RENAMED
#undef SL_SETTING
};

/* The old names of renamed settings (SL_RENAMED) and the setting each is now. */
static const struct sl_renamed {
    sl_setting setting;
    const char *old;
} renamed[] = {
#define SL_SETTING(name, readers, dflt, meaning)
#define SL_RENAMED(old, name) { SL_SET_##name, "STACKLENS_" #old },
#include "stacklens_settings.def"
#undef SL_RENAMED
#undef SL_SETTING
};
#define SL_RENAMED_COUNT (sizeof renamed / sizeof renamed[0])

/* [i]: renamed[i]'s old name was read and said so (any thread). */
static int renamed_said[SL_RENAMED_COUNT];

const char *sl_env_name(sl_setting setting)
{
    return setting_names[setting];
}

const char *sl_env(sl_setting setting)
{
    const char *v = getenv(setting_names[setting]);
    for (size_t i = 0; v == NULL && i < SL_RENAMED_COUNT; i++) {
        if (renamed[i].setting != setting || (v = getenv(renamed[i].old)) == NULL)
            continue;
        if (!__atomic_exchange_n(&renamed_said[i], 1, __ATOMIC_RELAXED))
            sl_warn("%s is now called %s: read as it (rename it; the old name will go)",
                    renamed[i].old, setting_names[setting]);
    }
    return v;
}

/*
 * Parses a decimal number in [0, max]. Returns 0 on success, -1 if the text
 * is not a plain non-negative decimal or is above max.
 */
static int parse_uint(const char *text, unsigned max, unsigned *out)
{
    if (text[0] < '0' || text[0] > '9')
        return -1;
    errno = 0;
    char *end;
    unsigned long v = strtoul(text, &end, 10);
    if (errno != 0 || *end != '\0' || v > max)
        return -1;
    *out = (unsigned)v;
    return 0;
}

/* A host name or IPv4 address: letters, digits, '-', '.', '_', neither first
 * nor last a '-' or '.'; or an IPv6 address (hex digits, ':' and '.'). The
 * same rule as stacklens/settings.py. */
static int valid_host(const char *host, size_t len, int bracketed)
{
    const char *allowed = bracketed ? "0123456789abcdefABCDEF:."
                                    : "0123456789abcdefghijklmnopqrstuvwxyz"
                                      "ABCDEFGHIJKLMNOPQRSTUVWXYZ-._";
    for (size_t i = 0; i < len; i++)
        if (host[i] == '\0' || strchr(allowed, host[i]) == NULL)
            return 0;
    return bracketed || (strchr("-.", host[0]) == NULL && strchr("-.", host[len - 1]) == NULL);
}

/*
 * Splits "host:port" or "[addr]:port" into cfg. Returns 0 on success, -1 if
 * the value is malformed (cfg is then left unchanged).
 */
static int parse_collector(const char *text, sl_config *cfg)
{
    const char *host = text, *host_end, *port;
    if (text[0] == '[') {
        host = text + 1;
        host_end = strchr(host, ']');
        if (host_end == NULL || host_end[1] != ':')
            return -1;
        port = host_end + 2;
    } else {
        host_end = strrchr(text, ':');
        if (host_end == NULL)
            return -1;
        port = host_end + 1;
    }
    size_t host_len = (size_t)(host_end - host);
    unsigned port_num;
    if (host_len == 0 || host_len >= sizeof cfg->collector_host
        || !valid_host(host, host_len, text[0] == '[')
        || parse_uint(port, 65535, &port_num) != 0 || port_num == 0
        || strlen(port) >= sizeof cfg->collector_port)
        return -1;
    memcpy(cfg->collector_host, host, host_len);
    cfg->collector_host[host_len] = '\0';
    strcpy(cfg->collector_port, port);
    return 0;
}

/* At most max visible ASCII characters (0x21-0x7E): the rule of settings.py. */
static int valid_token(const char *token, size_t max)
{
    size_t len = strnlen(token, max + 1);
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)token[i] < 0x21 || (unsigned char)token[i] > 0x7E)
            return 0;
    return len <= max;
}

/* Sets the disable flag of the I/O layer named w (any case); 0 if w names none. */
static int disable_io_layer(const char *w, sl_config *cfg)
{
    for (unsigned layer = 1; layer < SL_IO_LAYER_END; layer++) {
        const char *name = sl_io_layer_name(layer);
        if (name != NULL && strcasecmp(w, name) == 0) {
            cfg->disable_io[layer] = 1;
            return 1;
        }
    }
    return 0;
}

/* Sets the disable flags from a comma list; an unknown word warns once. */
static void parse_disable(const char *text, sl_config *cfg)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", text);
    char *save;
    for (char *w = strtok_r(buf, ", ", &save); w != NULL; w = strtok_r(NULL, ", ", &save)) {
        if (strcasecmp(w, "mpi") == 0)
            cfg->disable_mpi = 1;
        else if (strcasecmp(w, "processes") == 0)
            cfg->disable_processes = 1;
        else if (!disable_io_layer(w, cfg))
            sl_warn("STACKLENS_DISABLE: unknown module '%s' ignored (known: mpi, processes "
                    "and the I/O layers posix, stdio, mpiio)", w);
    }
}

/* Reads a bounded unsigned variable; a bad value warns and leaves *out. */
static void load_uint(sl_setting setting, unsigned lo, unsigned hi, unsigned *out)
{
    const char *v = sl_env(setting);
    unsigned n;
    if (v == NULL || *v == '\0')
        return;
    if (parse_uint(v, hi, &n) != 0 || n < lo)
        sl_warn("%s='%s' is not a number in [%u, %u]; using %u", sl_env_name(setting), v, lo,
                hi, *out);
    else
        *out = n;
}

/* Copies the setting's value into out[size]: a value too long warns and keeps the default. */
static void load_text(sl_setting setting, char *out, size_t size)
{
    const char *v = sl_env(setting);
    if (v == NULL || *v == '\0')
        return;
    if (strlen(v) >= size)
        sl_warn("%s is longer than %zu bytes; using %s", sl_env_name(setting), size - 1,
                out[0] ? out : "the default");
    else
        snprintf(out, size, "%s", v);
}

/* Who proves what to whom: STACKLENS_INGEST_AUTH, _COLLECTOR_SOCKET, _COLLECTOR_USER,
 * _MUNGE_SOCKET. An unknown mode warns and stays proven (never less checking). */
static void load_identity(sl_config *cfg)
{
    const char *v = sl_env(SL_SET_INGEST_AUTH);
    if (v != NULL && strcmp(v, "trusted") == 0)
        cfg->trusted = 1;
    else if (v != NULL && *v != '\0' && strcmp(v, "proven") != 0)
        sl_warn("STACKLENS_INGEST_AUTH='%.64s' is neither proven nor trusted; using proven", v);
    strcpy(cfg->collector_socket, SL_DEFAULT_SOCKET);
    load_text(SL_SET_COLLECTOR_SOCKET, cfg->collector_socket, sizeof cfg->collector_socket);
    if (strcmp(cfg->collector_socket, "off") == 0)
        cfg->collector_socket[0] = '\0';
    load_text(SL_SET_COLLECTOR_USER, cfg->collector_user, sizeof cfg->collector_user);
    load_text(SL_SET_MUNGE_SOCKET, cfg->munge_socket, sizeof cfg->munge_socket);
}

/* Fills cfg from the STACKLENS_* variables; bad values warn and keep the default. */
void sl_config_load(sl_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    strcpy(cfg->collector_host, SL_DEFAULT_HOST);
    strcpy(cfg->collector_port, SL_DEFAULT_PORT);
    cfg->interval_ms = SL_DEFAULT_INTERVAL_MS;
    cfg->finalize_timeout_ms = SL_DEFAULT_FIN_TIMEOUT;

    cfg->max_keys = SL_DEFAULT_MAX_KEYS;
    cfg->callsite_depth = SL_DEFAULT_SITE_DEPTH;
    cfg->max_callsites = SL_DEFAULT_MAX_SITES;
    cfg->spool_max_mb = SL_DEFAULT_SPOOL_MB;
    cfg->spool_node_max_mb = SL_DEFAULT_NODE_SPOOL_MB;
    const char *tmp = getenv("TMPDIR");
    snprintf(cfg->spool_dir, sizeof cfg->spool_dir, "%s/stacklens-spool-%u",
             tmp != NULL && *tmp == '/' && strlen(tmp) < sizeof cfg->spool_dir - 64 ? tmp : "/tmp",
             (unsigned)geteuid());

    const char *v = sl_env(SL_SET_DISABLE);
    if (v != NULL && *v != '\0')
        parse_disable(v, cfg);

    v = sl_env(SL_SET_COLLECTOR);
    if (v != NULL && *v != '\0' && parse_collector(v, cfg) != 0) {
        sl_warn("STACKLENS_COLLECTOR='%.300s' is not host:port; nothing is sent "
                "(fix it to profile this program)", v);
        cfg->send_disabled = 1;
    }

    v = sl_env(SL_SET_INTERVAL_MS);
    if (v != NULL && *v != '\0') {
        unsigned ms;
        if (parse_uint(v, SL_MAX_INTERVAL_MS, &ms) != 0) {
            sl_warn("STACKLENS_INTERVAL_MS='%s' is not a number of ms up to %u; using %u",
                    v, SL_MAX_INTERVAL_MS, SL_DEFAULT_INTERVAL_MS);
        } else if (ms < SL_MIN_INTERVAL_MS) {
            sl_warn("STACKLENS_INTERVAL_MS=%u is below the minimum; using %u",
                    ms, SL_MIN_INTERVAL_MS);
            cfg->interval_ms = SL_MIN_INTERVAL_MS;
        } else {
            cfg->interval_ms = ms;
        }
    }

    v = sl_env(SL_SET_FINALIZE_TIMEOUT_MS);
    if (v != NULL && *v != '\0'
        && parse_uint(v, SL_MAX_FIN_TIMEOUT, &cfg->finalize_timeout_ms) != 0)
        sl_warn("STACKLENS_FINALIZE_TIMEOUT_MS='%s' is not a number of ms up to %u; using %u",
                v, SL_MAX_FIN_TIMEOUT, SL_DEFAULT_FIN_TIMEOUT);

    load_uint(SL_SET_MAX_KEYS, SL_MIN_MAX_KEYS, SL_MAX_MAX_KEYS, &cfg->max_keys);
    load_uint(SL_SET_CALLSITE_DEPTH, 0, SL_BOUND_max_site_depth, &cfg->callsite_depth);
    load_uint(SL_SET_MAX_CALLSITES, 1, SL_MAX_MAX_SITES, &cfg->max_callsites);
    load_uint(SL_SET_SPOOL_MAX_MB, 1, SL_MAX_SPOOL_MB, &cfg->spool_max_mb);
    load_uint(SL_SET_SPOOL_NODE_MAX_MB, 1, SL_MAX_SPOOL_MB, &cfg->spool_node_max_mb);
    v = sl_env(SL_SET_SPOOL_DIR);
    if (v != NULL) {
        if (*v == '\0' || strcmp(v, "off") == 0)
            cfg->spool_dir[0] = '\0';
        else if (v[0] != '/' || strlen(v) >= sizeof cfg->spool_dir - 64)
            sl_warn("STACKLENS_SPOOL_DIR='%s' is not an absolute path of at most %zu bytes; "
                    "using %s", v, sizeof cfg->spool_dir - 64, cfg->spool_dir);
        else
            snprintf(cfg->spool_dir, sizeof cfg->spool_dir, "%s", v);
    }

    load_identity(cfg);

    v = sl_env(SL_SET_INGEST_TOKEN);
    if (v != NULL) {
        if (!valid_token(v, sizeof cfg->token)) {
            sl_warn("STACKLENS_INGEST_TOKEN must be at most %zu visible ASCII characters "
                    "(no spaces); nothing is sent", sizeof cfg->token);
            cfg->send_disabled = 1;
        } else {
            memcpy(cfg->token, v, strlen(v));
        }
    }
}
