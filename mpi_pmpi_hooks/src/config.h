/*
 * config.h — run-time settings of libstacklens, read once from the
 * environment (the same STACKLENS_* names the Python settings use).
 * A bad value gives one "stacklens: " warning and the default; never fatal.
 * A bad collector address or token instead turns sending off (send_disabled):
 * frames for the wrong place, or refused for sure, are never sent.
 */
#ifndef SL_CONFIG_H
#define SL_CONFIG_H

#include "stacklens_wire.h"

/* Every declared setting (contract/stacklens_settings.def), SL_SET_<NAME>: the library
 * reads a STACKLENS_* variable only through sl_env, so only a declared one. */
typedef enum sl_setting {
#define SL_SETTING(name, readers, dflt, meaning) SL_SET_##name,
#define SL_RENAMED(old, name)
#include "stacklens_settings.def"
#undef SL_RENAMED
#undef SL_SETTING
    SL_SET_COUNT
} sl_setting;

/* The value of the setting's STACKLENS_<NAME> variable; when it is not set, that of an
 * old name of the setting (SL_RENAMED), with one warning per process and old name; NULL
 * when neither is set. */
const char *sl_env(sl_setting setting);

/* The variable name of a setting, "STACKLENS_<NAME>" (for warnings). */
const char *sl_env_name(sl_setting setting);

typedef struct sl_config {
    char collector_host[256];      /* STACKLENS_COLLECTOR host part (name or address) */
    char collector_port[8];        /* STACKLENS_COLLECTOR port part, decimal */
    unsigned interval_ms;          /* STACKLENS_INTERVAL_MS, >= 10 */
    unsigned finalize_timeout_ms;  /* STACKLENS_FINALIZE_TIMEOUT_MS */
    char token[64];                /* STACKLENS_INGEST_TOKEN, wire text(64), NUL-padded */
    int disable_mpi;               /* STACKLENS_DISABLE lists "mpi" */
    int disable_io[SL_IO_LAYER_END]; /* [layer]: ... lists the layer's name (SL_IO_LAYER) */
    int disable_processes;         /* ... "processes": no profiling without MPI */
    unsigned max_keys;             /* STACKLENS_MAX_KEYS: files, communicators, coll keys */
    unsigned callsite_depth;       /* STACKLENS_CALLSITE_DEPTH: 0 = off, 1 .. 8 frames */
    unsigned max_callsites;        /* STACKLENS_MAX_CALLSITES: call-site paths per rank */
    char spool_dir[512];           /* STACKLENS_SPOOL_DIR, "" = no spool */
    unsigned spool_max_mb;         /* STACKLENS_SPOOL_MAX_MB: spool size cap per process */
    unsigned spool_node_max_mb;    /* STACKLENS_SPOOL_NODE_MAX_MB: cap of the directory */
    int send_disabled;             /* STACKLENS_COLLECTOR or _INGEST_TOKEN invalid: send nothing */
    int trusted;                   /* STACKLENS_INGEST_AUTH=trusted: no hello, nothing proven */
    char collector_socket[108];    /* STACKLENS_COLLECTOR_SOCKET (sun_path), "" = none */
    char collector_user[64];       /* STACKLENS_COLLECTOR_USER, "" = root or our own user */
    char munge_socket[256];        /* STACKLENS_MUNGE_SOCKET, "" = libmunge's default */
} sl_config;

/* Fills cfg from the environment, warning about and replacing bad values. */
void sl_config_load(sl_config *cfg);

#endif /* SL_CONFIG_H */
