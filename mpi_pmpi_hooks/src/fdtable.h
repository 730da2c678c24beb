/*
 * fdtable.h — a descriptor table of its own for the sender thread.
 *
 * While two threads share a descriptor table, the kernel takes a reference
 * on the file on every read(), write(), lseek() ... and, for a regular file
 * whose reference count is then above one, the file-position mutex
 * (fdget_pos). A process of one thread skips both. The sender thread would
 * make every single-threaded program pay this on each of its file calls
 * (about 60 ns per 4 KiB write() on tmpfs on the development VM), whether or
 * not the file is tracked.
 *
 * So the sender thread takes a private copy of the table
 * (unshare(CLONE_FILES)) and closes every descriptor it inherited except the
 * two eventfds it shares with the application's threads (keep). The
 * application's table is then used by the application's threads alone and
 * its files are referenced once, as without the library. What the sender
 * opens afterwards (the collector socket, spool files, sysfs counters, name
 * resolution) lives in its private table: the application cannot see it in
 * /proc/self/fd, close it, reuse its number, or inherit it across fork().
 * Descriptors 0-2 of the private table are /dev/null, so that no stray write
 * to "stderr" on the sender thread lands in a socket or spool file; the
 * library's own warnings reach the application's stderr through a transient
 * duplicate (pidfd_getfd(2), see sl_fdtable_app_fd), never a lasting one:
 * closing stdio still gives its readers end-of-file.
 *
 * Closing the inherited copies is a close() like any other for the file
 * systems (their ->flush runs, as for a dup() and close() in the program);
 * record locks, which belong to the application's table, are kept.
 *
 * Needs close_range (Linux 5.9) and pidfd_getfd (5.6); without them, or if
 * the unshare fails, the table stays shared, as before (and slower). The
 * pidfd names the thread-group leader: once the program's main thread has
 * ended (pthread_exit) the sender's warnings have no stderr to go to.
 */
#ifndef SL_FDTABLE_H
#define SL_FDTABLE_H

/* 1 on a thread whose descriptor table is private (the sender, once set up). */
extern __thread int sl_tls_fdtable_private __attribute__((tls_model("initial-exec")));

/*
 * Checks whether the kernel has close_range and pidfd_getfd. Call it on an
 * application thread before the sender thread starts: the check opens (and
 * closes) a pidfd, which must come and go in the application's table
 * synchronously, never while the application's own close/dup sequences run
 * on another thread of the shared table.
 */
void sl_fdtable_probe(void);

/*
 * Gives the calling thread its private table (if sl_fdtable_probe found the
 * kernel able to), keeping only the n
 * descriptors of keep (e.g. eventfds shared with other threads). Returns 1
 * if the table is now private, 0 if it is still shared with the process.
 */
int sl_fdtable_private(const int *keep, int n);

/*
 * A new descriptor (close-on-exec) for what descriptor fd of the
 * application's table refers to, for a thread with a private table; the
 * caller closes it soon after. -1 if none (fd not open, no pidfd).
 */
int sl_fdtable_app_fd(int fd);

#endif /* SL_FDTABLE_H */
