/*
 * spooler.c — a standalone program that waits for a line on stdin (a pipe:
 * no file I/O, so stacklens has not started yet), then writes 100 bytes to
 * FILE and exits.
 *
 *   spooler FILE
 *
 * Run against an unreachable collector, its frames go to the spool directory.
 */
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    char c, block[100];
    while (read(0, &c, 1) == 1 && c != '\n') {
    }
    memset(block, 's', sizeof block);
    int fd = argc == 2 ? open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0600) : -1;
    return fd >= 0 && write(fd, block, sizeof block) == 100 && close(fd) == 0 ? 0 : 1;
}
