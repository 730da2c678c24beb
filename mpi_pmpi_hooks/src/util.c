/*
 * util.c — the tick clock's calibration, warnings on stderr and text-field
 * copies (see util.h).
 */
#include "util.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "fdtable.h"
#include "keytab.h"
#include "stacklens_text.h"

int sl_ticks_tsc;
static uint64_t base_ticks, base_ns; /* the pair taken at load */

/* Invariant TSC (runs at a constant rate in every C- and P-state), read with CPUID. */
static int invariant_tsc(void)
{
#if defined(__x86_64__) || defined(__i386__)
    unsigned a, b, c, d;
    if (__get_cpuid(0x80000000u, &a, &b, &c, &d) && a >= 0x80000007u
        && __get_cpuid(0x80000007u, &a, &b, &c, &d))
        return (d >> 8) & 1u;
#endif
    return 0;
}

/* Chooses TSC ticks where the TSC is invariant and records the base pair. */
void sl_ticks_init(void)
{
    sl_ticks_tsc = invariant_tsc();
    base_ns = sl_mono_ns();
    base_ticks = sl_ticks();
}

/* ns per tick over the time since load; the last good ratio if none has passed. */
double sl_ticks_ratio(void)
{
    static double ratio = 1.0;
    if (!sl_ticks_tsc)
        return 1.0;
    uint64_t ns = sl_mono_ns();
    uint64_t ticks = sl_ticks();
    if (ticks > base_ticks && ns > base_ns)
        ratio = (double)(ns - base_ns) / (double)(ticks - base_ticks);
    return ratio;
}

/* Formats "stacklens: <message>\n" and writes it in one write() call to the
 * application's stderr (from the sender thread's private descriptor table:
 * through a duplicate held only for that write, see fdtable.h). */
void sl_warn(const char *fmt, ...)
{
    char line[512];
    int head = snprintf(line, sizeof line, "stacklens: ");
    va_list ap;
    va_start(ap, fmt);
    int body = vsnprintf(line + head, sizeof line - (size_t)head - 1, fmt, ap);
    va_end(ap);
    size_t len = (size_t)head + (body < 0 ? 0 : (size_t)body);
    if (len > sizeof line - 2)
        len = sizeof line - 2;
    line[len++] = '\n';
    int borrowed = sl_tls_fdtable_private;
    int fd = borrowed ? sl_fdtable_app_fd(STDERR_FILENO) : STDERR_FILENO;
    ssize_t rc = fd >= 0 ? write(fd, line, len) : -1;
    (void)rc; /* nothing sensible to do if stderr is gone */
    if (borrowed && fd >= 0)
        close(fd);
}

/* Bounded, UTF-8-safe copy into a NUL-padded text field. */
void sl_copy_text(char *dst, size_t n, const char *src)
{
    size_t len = strnlen(src, n + 1);
    if (len > n) {
        len = n;
        /* Back off over UTF-8 continuation bytes (10xxxxxx) so a character
         * cut by the limit is dropped whole. */
        while (len > 0 && ((unsigned char)src[len] & 0xC0) == 0x80)
            len--;
    }
    memcpy(dst, src, len);
    memset(dst + len, 0, n - len);
}

/*
 * Writes src into the n-byte field dst unchanged if it fits and every character
 * passes keep (NULL: any); else as a readable prefix — each character keep
 * refuses (or byte that is not UTF-8) written as '_' — cut at a character
 * boundary, then "~" and the 16 hex digits of the 64-bit FNV-1a hash of the
 * whole of src, so that two different values never share a field.
 */
static void copy_or_digest(char *dst, size_t n, const char *src,
                           size_t (*keep)(const uint8_t *, size_t))
{
    const uint8_t *s = (const uint8_t *)src;
    size_t len = strlen(src), i = 0, c = 1;
    while (i < len && (c = keep ? keep(s + i, len - i) : 1) != 0)
        i += c;
    if (len <= n && i == len) {
        sl_copy_text(dst, n, src);
        return;
    }
    char tail[18];
    snprintf(tail, sizeof tail, "~%016llx", (unsigned long long)sl_hash_bytes(src, len));
    size_t room = n - (sizeof tail - 1), out = 0;
    for (i = 0; i < len;) {
        c = keep ? keep(s + i, len - i) : 1;
        size_t take = c ? c : 1;
        if (out + (c ? c : 1) > room)
            break;
        if (c)
            memcpy(dst + out, src + i, c);
        else
            dst[out] = '_';
        out += c ? c : 1;
        i += take;
    }
    if (!keep) /* a path: never end inside a UTF-8 character */
        while (out > 0 && out < len && (s[out] & 0xC0) == 0x80)
            out--;
    memcpy(dst + out, tail, sizeof tail - 1);
    memset(dst + out + sizeof tail - 1, 0, n - out - (sizeof tail - 1));
}

void sl_copy_id(char *dst, size_t n, const char *src)
{
    copy_or_digest(dst, n, src, sl_id_char);
}

void sl_copy_path(char *dst, size_t n, const char *src)
{
    copy_or_digest(dst, n, src, NULL);
}
