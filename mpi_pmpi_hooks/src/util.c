/*
 * util.c — warnings on stderr and text-field copies (see util.h).
 */
#include "util.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Formats "stacklens: <message>\n" and writes it in one write() call. */
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
    ssize_t rc = write(STDERR_FILENO, line, len);
    (void)rc; /* nothing sensible to do if stderr is gone */
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
