/*
 * stacklens_text.h — the rule for ids on the wire (job id, host), shared by the
 * hook library (which makes ids that follow it) and the collector's codec (which
 * refuses ids that do not); stacklens/wire.py's clean_text states it for Python.
 *
 * An id is UTF-8 text (no overlong forms, surrogates or code points above
 * U+10FFFF) without control characters (U+0000-U+001F, U+007F-U+009F).
 */
#ifndef STACKLENS_TEXT_H
#define STACKLENS_TEXT_H

#include <stddef.h>
#include <stdint.h>

/* Length in bytes of the character s[0..len) starts with if it is allowed in an
 * id, 0 if it is not (a control character, or not valid UTF-8). */
static inline size_t sl_id_char(const uint8_t *s, size_t len)
{
    uint32_t c = s[0], need, min;
    if (c < 0x80)
        return c >= 0x20 && c != 0x7F;
    if (c >= 0xC2 && c <= 0xDF)
        need = 1, min = 0x80, c &= 0x1F;
    else if (c >= 0xE0 && c <= 0xEF)
        need = 2, min = 0x800, c &= 0x0F;
    else if (c >= 0xF0 && c <= 0xF4)
        need = 3, min = 0x10000, c &= 0x07;
    else
        return 0;
    if (len <= need)
        return 0;
    for (uint32_t k = 1; k <= need; k++) {
        if ((s[k] & 0xC0) != 0x80)
            return 0;
        c = c << 6 | (s[k] & 0x3F);
    }
    if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF) || c <= 0x9F)
        return 0;
    return need + 1;
}

#endif /* STACKLENS_TEXT_H */
