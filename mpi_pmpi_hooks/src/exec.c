/*
 * exec.c — the exec family: execve execv execvp execvpe execl execlp execle
 * fexecve execveat. An exec replaces the process image, and with it the
 * sender thread and the counters of the interval in progress: before the
 * call, the sender delivers them as the rank's final frame (spooled first,
 * bounded by STACKLENS_FINALIZE_TIMEOUT_MS, see lifecycle.h). If the exec
 * fails and returns, the sender starts again and counting goes on. glibc's
 * own exec functions call each other internally (not through the PLT), so
 * every entry point is wrapped; the execl forms collect their arguments
 * into an array and call the next execv form themselves.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <unistd.h>

#include "interpose.h"
#include "lifecycle.h"

/* Runs the exec call expr between the flush and, if it returns, the restart. */
#define SL_EXEC(expr) \
    do { \
        int began = sl_exec_begin(); \
        int rc = (expr); \
        int saved = errno; \
        sl_exec_failed(began); \
        errno = saved; \
        return rc; \
    } while (0)

/* Arguments of an execl form after arg (up to and including the NULL). */
static size_t count_args(va_list *ap)
{
    size_t n = 1;
    while (va_arg(*ap, char *) != NULL)
        n++;
    return n;
}

/* Declares argv, on the stack like glibc's own execl, holding arg and the call's
 * arguments after it up to and including the NULL; ap is left after the NULL
 * (execle's envp follows). */
#define SL_EXECL_ARGV(arg, ap) \
    va_list count_; \
    va_start(ap, arg); \
    va_copy(count_, ap); \
    size_t n_ = count_args(&count_); \
    va_end(count_); \
    char **argv = __builtin_alloca((n_ + 1) * sizeof(char *)); \
    argv[0] = (char *)(arg); \
    for (size_t i_ = 1; i_ <= n_; i_++) \
        argv[i_] = va_arg(ap, char *)

SL_EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
    SL_NEXT(execve);
    SL_EXEC(real_execve(path, argv, envp));
}

SL_EXPORT int execv(const char *path, char *const argv[])
{
    SL_NEXT(execv);
    SL_EXEC(real_execv(path, argv));
}

SL_EXPORT int execvp(const char *file, char *const argv[])
{
    SL_NEXT(execvp);
    SL_EXEC(real_execvp(file, argv));
}

SL_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
    SL_NEXT(execvpe);
    SL_EXEC(real_execvpe(file, argv, envp));
}

SL_EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
{
    SL_NEXT(fexecve);
    SL_EXEC(real_fexecve(fd, argv, envp));
}

SL_EXPORT int execveat(int dirfd, const char *path, char *const argv[], char *const envp[],
                       int flags)
{
    SL_NEXT(execveat);
    SL_EXEC(real_execveat(dirfd, path, argv, envp, flags));
}

SL_EXPORT int execl(const char *path, const char *arg, ...)
{
    va_list ap;
    SL_EXECL_ARGV(arg, ap);
    va_end(ap);
    SL_NEXT(execv);
    SL_EXEC(real_execv(path, argv));
}

SL_EXPORT int execlp(const char *file, const char *arg, ...)
{
    va_list ap;
    SL_EXECL_ARGV(arg, ap);
    va_end(ap);
    SL_NEXT(execvp);
    SL_EXEC(real_execvp(file, argv));
}

SL_EXPORT int execle(const char *path, const char *arg, ...)
{
    va_list ap;
    SL_EXECL_ARGV(arg, ap);
    char *const *envp = va_arg(ap, char *const *);
    va_end(ap);
    SL_NEXT(execve);
    SL_EXEC(real_execve(path, argv, envp));
}
