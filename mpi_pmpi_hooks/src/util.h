/*
 * util.h — small helpers shared by the stacklens modules: clocks, the one
 * stderr warning format ("stacklens: ..."), and bounded text copies into the
 * fixed-size text fields of the wire format.
 */
#ifndef SL_UTIL_H
#define SL_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* Monotonic clock in ns: durations and sender deadlines. */
static inline uint64_t sl_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Wall clock in ns since the Unix epoch (UTC): interval timestamps. */
static inline uint64_t sl_real_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Writes one line "stacklens: <message>" to stderr with a single write(). */
void sl_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/*
 * Copies src into the text field dst of size n: at most n bytes, cut at a
 * UTF-8 character boundary, the rest of dst zero-filled (so a value of
 * exactly n bytes fills the field without a terminating NUL).
 */
void sl_copy_text(char *dst, size_t n, const char *src);

#endif /* SL_UTIL_H */
