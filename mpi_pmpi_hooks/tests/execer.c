/*
 * execer.c — a standalone program that ends by exec: it writes 1000 bytes to
 * FILE, tries to exec a program that does not exist (the exec fails and it
 * goes on), writes 500 more bytes, then execs /bin/true with an environment
 * without LD_PRELOAD (the new image is not profiled).
 *
 *   execer FILE
 *
 * Expected: one open, two writes and 1500 bytes written on FILE, the job
 * finished, exit status 0 (that of /bin/true).
 */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    char block[1000];
    memset(block, 'e', sizeof block);
    int fd = argc == 2 ? open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0600) : -1;
    if (fd < 0 || write(fd, block, 1000) != 1000)
        return 1;
    char *const none[] = { "missing", NULL };
    if (execv("/nonexistent/stacklens-missing", none) == 0)
        return 1;
    if (write(fd, block, 500) != 500 || close(fd) != 0)
        return 1;
    char *const env[] = { "PATH=/usr/bin:/bin", NULL };
    execle("/bin/true", "true", (char *)NULL, env);
    perror("execle");
    return 1;
}
