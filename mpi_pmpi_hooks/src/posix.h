/*
 * posix.h — what the POSIX wrappers (posix.c) offer the rest of the library.
 */
#ifndef SL_POSIX_H
#define SL_POSIX_H

#include <pthread.h>

/*
 * Starts one of stacklens's own threads (the sender): like pthread_create
 * with default attributes, but not seen as a thread of the program, so
 * tracked I/O keeps its direct calls (posix.c). The thread marks itself as
 * not the application's (sl_tls_in_call). Returns pthread_create's result.
 */
int sl_own_thread_create(pthread_t *thread, void *(*fn)(void *));

#endif /* SL_POSIX_H */
