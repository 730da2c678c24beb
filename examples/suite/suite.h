/*
 * suite.h — the shared part of the wrapper-family suite (the programs of examples/suite): each
 * program drives one family of wrapped MPI calls in a known pattern and counts, itself,
 * every wrapped call it makes and the payload bytes stacklens defines for it (see
 * contract/mpi_functions.spec, "bytes="): count x type size for sends, RMA transfers and
 * rooted or plain collectives, the sum over the counts for v and w forms, the bytes
 * received (from the status) for receives. At the end each rank prints, in op name
 * order, one line per op, `rank R op NAME CALLS BYTES`, then one line per check of its
 * results, `rank R check WHAT ok|FAILED`; it exits 1 if a check failed.
 * tests/hooks/test_suite.py runs every program with and without the hooks under Open
 * MPI and MPICH and compares the outputs, exit codes and the stored counts with these.
 *
 * Not thread-safe but for suite_count_locked (threads.c).
 */
#ifndef SUITE_H
#define SUITE_H

#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SUITE_MAX_OPS 64

static struct suite_op {
    const char *name;
    long long calls, bytes;
} suite_ops[SUITE_MAX_OPS];
static int suite_nops, suite_failed, suite_rank;
static pthread_mutex_t suite_lock = PTHREAD_MUTEX_INITIALIZER;

/* The row of op name (made on first use). */
static inline struct suite_op *suite_row(const char *name)
{
    for (int i = 0; i < suite_nops; i++)
        if (strcmp(suite_ops[i].name, name) == 0)
            return &suite_ops[i];
    if (suite_nops == SUITE_MAX_OPS) {
        fprintf(stderr, "suite: more than %d ops\n", SUITE_MAX_OPS);
        exit(2);
    }
    suite_ops[suite_nops].name = name;
    return &suite_ops[suite_nops++];
}

/* One call of op name with bytes of payload. */
static inline void suite_count(const char *name, long long bytes)
{
    struct suite_op *op = suite_row(name);
    op->calls++;
    op->bytes += bytes;
}

/* Bytes of op name counted later (a receive's, when its request completes). */
static inline void suite_bytes(const char *name, long long bytes)
{
    suite_row(name)->bytes += bytes;
}

/* suite_count from any thread. */
static inline void suite_count_locked(const char *name, long long bytes)
{
    pthread_mutex_lock(&suite_lock);
    suite_count(name, bytes);
    pthread_mutex_unlock(&suite_lock);
}

/* One check of the program's results, printed at the end. */
static struct {
    char what[64];
    int ok;
} suite_checks[64];
static int suite_nchecks;

static inline void suite_check(int ok, const char *what)
{
    if (suite_nchecks < 64) {
        snprintf(suite_checks[suite_nchecks].what, sizeof suite_checks[0].what, "%s", what);
        suite_checks[suite_nchecks++].ok = ok;
    }
    suite_failed |= !ok;
}

static inline int suite_by_name(const void *a, const void *b)
{
    return strcmp(((const struct suite_op *)a)->name, ((const struct suite_op *)b)->name);
}

/* Prints the counts and checks (after MPI_Finalize or its session's end, which are
 * counted too); returns the exit code. */
static inline int suite_report(void)
{
    qsort(suite_ops, (size_t)suite_nops, sizeof suite_ops[0], suite_by_name);
    for (int i = 0; i < suite_nops; i++)
        printf("rank %d op %s %lld %lld\n", suite_rank, suite_ops[i].name, suite_ops[i].calls,
               suite_ops[i].bytes);
    for (int i = 0; i < suite_nchecks; i++)
        printf("rank %d check %s %s\n", suite_rank, suite_checks[i].what,
               suite_checks[i].ok ? "ok" : "FAILED");
    fflush(stdout);
    return suite_failed;
}

/* MPI_Init and the rank and size of the world (MPI_Comm_rank/size are not wrapped). */
static inline void suite_init(int *argc, char ***argv, int *rank, int *size)
{
    MPI_Init(argc, argv);
    suite_count("MPI_Init", 0);
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    MPI_Comm_size(MPI_COMM_WORLD, size);
    suite_rank = *rank;
}

/* MPI_Finalize, counted, then the report. */
static inline int suite_end(void)
{
    MPI_Finalize();
    suite_count("MPI_Finalize", 0);
    return suite_report();
}

#endif /* SUITE_H */
