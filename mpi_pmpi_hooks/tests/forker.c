/*
 * forker.c — an MPI rank that forks. Run with 2 ranks; argv[1] is a
 * directory for the children's files.
 *
 * Pattern, per rank r (peer 1-r):
 *   1. exchange one message of 1000+r bytes (MPI_Sendrecv);
 *   2. fork child A: it writes 4096 bytes to DIR/child-a.<r> with write(),
 *      sleeps 300 ms (several sender intervals of the parent) and _exit(0)s;
 *   3. fork child B: it exec's /bin/sh, which writes DIR/child-b.<r>;
 *   4. fork child C: it fwrite()s 100 bytes to DIR/child-c.<r> and exit(0)s
 *      (atexit handlers and library destructors run in the child);
 *   5. waits for the three children, then exchanges one more message of
 *      2000+r bytes (MPI_Sendrecv).
 * EXPECTED: rank r sends 2 messages, 3000+2r bytes, to 1-r and receives the
 * peer's; 2 MPI_Sendrecv calls per rank; no file-system I/O of the
 * children is counted (they are not ranks) and no frame comes from them.
 * Exit status 1 if a child failed.
 */
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* One Sendrecv of n bytes to and from the other rank. */
static void exchange(int rank, int n)
{
    char *s = calloc(1, 4096), *r = calloc(1, 4096);
    MPI_Sendrecv(s, n, MPI_BYTE, 1 - rank, 0, r, 4096, MPI_BYTE, 1 - rank, 0, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    free(s);
    free(r);
}

/* Forks a child running body(dir, rank); returns its pid. */
static pid_t spawn(void (*body)(const char *, int), const char *dir, int rank)
{
    pid_t pid = fork();
    if (pid == 0)
        body(dir, rank);
    return pid;
}

/* Child A: write(), linger past a few intervals, _exit. */
static void child_a(const char *dir, int rank)
{
    char path[4096], buf[4096] = { 0 };
    snprintf(path, sizeof path, "%s/child-a.%d", dir, rank);
    int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0644);
    int ok = fd >= 0 && write(fd, buf, sizeof buf) == (ssize_t)sizeof buf;
    if (fd >= 0)
        close(fd);
    struct timespec ts = { 0, 300 * 1000 * 1000 };
    nanosleep(&ts, NULL);
    _exit(ok ? 0 : 1);
}

/* Child B: exec a shell that writes a file. */
static void child_b(const char *dir, int rank)
{
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "printf hello > '%s/child-b.%d'", dir, rank);
    execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
    _exit(127);
}

/* Child C: stdio, then a normal exit() with destructors. */
static void child_c(const char *dir, int rank)
{
    char path[4096], buf[100] = { 0 };
    snprintf(path, sizeof path, "%s/child-c.%d", dir, rank);
    FILE *f = fopen(path, "w");
    int ok = f != NULL && fwrite(buf, 1, sizeof buf, f) == sizeof buf;
    if (f != NULL)
        fclose(f);
    exit(ok ? 0 : 1);
}

int main(int argc, char **argv)
{
    int rank;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    const char *dir = argc > 1 ? argv[1] : "/tmp";
    exchange(rank, 1000 + rank);
    pid_t kids[3] = { spawn(child_a, dir, rank), spawn(child_b, dir, rank),
                      spawn(child_c, dir, rank) };
    int bad = 0;
    for (int i = 0; i < 3; i++) {
        int st = 0;
        bad |= kids[i] < 0 || waitpid(kids[i], &st, 0) != kids[i] || !WIFEXITED(st)
               || WEXITSTATUS(st) != 0;
    }
    exchange(rank, 2000 + rank);
    MPI_Finalize();
    if (rank == 0)
        printf("forker: %s\n", bad ? "CHILD FAILED" : "ok");
    return bad;
}
