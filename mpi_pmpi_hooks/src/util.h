/*
 * util.h — small helpers shared by the stacklens modules: clocks, the one
 * stderr warning format ("stacklens: ..."), and bounded text copies into the
 * fixed-size text fields of the wire format.
 *
 * Durations on the counted paths (MPI calls, tracked I/O) are read in ticks
 * (sl_ticks): TSC cycles on x86 with an invariant TSC (CPUID 0x80000007
 * EDX bit 8, checked once at load), else ns of CLOCK_MONOTONIC. Counters
 * accumulate ticks; the sender thread converts each interval's tick deltas
 * to ns once, when it encodes them (sl_ticks_ratio, sl_ticks_to_ns).
 */
#ifndef SL_UTIL_H
#define SL_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

/* Monotonic clock in ns: sender deadlines, the tick calibration, and the
 * ticks themselves where there is no invariant TSC. */
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

/* 1 if ticks are TSC cycles, 0 if they are ns (set once by sl_ticks_init). */
extern int sl_ticks_tsc;

/* The tick clock of the counted paths: one rdtsc (clock_gettime without a TSC). */
static inline uint64_t sl_ticks(void)
{
#if defined(__x86_64__) || defined(__i386__)
    if (__builtin_expect(sl_ticks_tsc, 1))
        return __rdtsc();
#endif
    return sl_mono_ns();
}

/* Ticks from t0 to t1; 0 if t1 is earlier (TSCs of two CPUs a few cycles apart). */
static inline uint64_t sl_ticks_between(uint64_t t0, uint64_t t1)
{
    return t1 > t0 ? t1 - t0 : 0;
}

/* Library load: chooses the tick clock and takes the first (ticks, ns) pair. */
void sl_ticks_init(void);

/* ns per tick, from the pair of sl_ticks_init to one taken now (exactly 1
 * without a TSC). Sender thread only (it keeps the last good ratio). */
double sl_ticks_ratio(void);

/* A tick delta in ns at ratio (from sl_ticks_ratio), rounded. */
static inline uint64_t sl_ticks_to_ns(uint64_t ticks, double ratio)
{
    return sl_ticks_tsc ? (uint64_t)((double)ticks * ratio + 0.5) : ticks;
}

/* Writes one line "stacklens: <message>" to stderr with a single write(). */
void sl_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/*
 * Copies src into the text field dst of size n: at most n bytes, cut at a
 * UTF-8 character boundary, the rest of dst zero-filled (so a value of
 * exactly n bytes fills the field without a terminating NUL).
 */
void sl_copy_text(char *dst, size_t n, const char *src);

/*
 * Copies an id (job id, host name) into its n-byte field: as it is if it fits
 * and is UTF-8 text without control characters (the collector refuses any
 * other id: contract/stacklens_text.h), else as a readable prefix (characters
 * that break the rule written as '_') plus "~" and 16 hex digits of a 64-bit
 * hash of the whole value. Never cut silently: different ids stay different.
 */
void sl_copy_id(char *dst, size_t n, const char *src);

/* Copies a path into its n-byte field like sl_copy_id, but only its length
 * decides (any byte but NUL is kept): a longer path becomes its first bytes
 * (cut at a UTF-8 boundary) plus "~" and the hash of the whole path. */
void sl_copy_path(char *dst, size_t n, const char *src);

#endif /* SL_UTIL_H */
