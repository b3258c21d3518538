/*
 * strbuf.c - a growable string for the writers that build text in memory
 * (model, strategy and cost JSON, DOT graphs, Chrome traces and SVG).
 *
 * Each of those writers builds the whole text first and then writes it with
 * sf_write_file_atomic, so that a failure never leaves half a file. Out of memory
 * is sticky rather than returned by every append: builders make hundreds of
 * appends and check once at the end, the way SQLite's StrAccum does.
 *
 * The capacity doubles from 4 KiB, so appends are amortized O(1). printf
 * formats straight into the spare room and only when the text did not fit grows
 * the buffer and formats again (from a va_copy), so there is no fixed-size
 * temporary and no length limit; a piece of any size costs one pass when it fits.
 */
#include "soapflow/core.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STRBUF_MIN_CAP 4096

/* Room for `extra` more bytes and the NUL: 0, or -1 with oom set. */
static int strbuf_reserve(sf_strbuf *b, size_t extra) {
    if (b->oom) return -1;
    if (extra > SIZE_MAX - 1 - b->len) {
        b->oom = 1;
        return -1;
    }
    size_t need = b->len + extra + 1;
    if (need <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : STRBUF_MIN_CAP;
    while (cap < need) {
        if (cap > SIZE_MAX / 2) {
            cap = need;
            break;
        }
        cap *= 2;
    }
    char *s = realloc(b->s, cap);
    if (!s) {
        b->oom = 1;
        return -1;
    }
    b->s = s;
    b->cap = cap;
    return 0;
}

void sf_strbuf_add(sf_strbuf *b, const char *s, size_t n) {
    if (strbuf_reserve(b, n)) return;
    if (n) memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = '\0';
}

void sf_strbuf_puts(sf_strbuf *b, const char *s) { sf_strbuf_add(b, s, strlen(s)); }

void sf_strbuf_vprintf(sf_strbuf *b, const char *fmt, va_list ap) {
    if (b->oom) return;
    va_list again;
    va_copy(again, ap);
    size_t room = b->cap - b->len; /* with the NUL; 0 before the first append */
    int n = vsnprintf(room ? b->s + b->len : NULL, room, fmt, ap);
    if (n >= 0 && (size_t)n >= room && strbuf_reserve(b, (size_t)n) == 0)
        vsnprintf(b->s + b->len, (size_t)n + 1, fmt, again);
    va_end(again);
    if (n < 0) b->oom = 1; /* an encoding error: the text would be incomplete */
    if (b->oom) {
        if (b->s) b->s[b->len] = '\0'; /* drop any partial piece */
        return;
    }
    b->len += (size_t)n;
}

void sf_strbuf_printf(sf_strbuf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    sf_strbuf_vprintf(b, fmt, ap);
    va_end(ap);
}

char *sf_strbuf_take(sf_strbuf *b) {
    char *s = b->s;
    if (b->oom) {
        free(s);
        s = NULL;
    } else if (!s) {
        s = calloc(1, 1); /* nothing appended: an empty string */
    }
    *b = (sf_strbuf){0};
    return s;
}

void sf_strbuf_free(sf_strbuf *b) {
    free(b->s);
    *b = (sf_strbuf){0};
}

/* The length of the valid UTF-8 sequence at s (1-4), or 0 when s does not
 * start one: overlong forms, surrogates, code points past U+10FFFF and the
 * non-characters U+FFFE and U+FFFF that XML refuses are all invalid. */
static int utf8_valid_len(const unsigned char *s) {
    unsigned c = s[0];
    int n;
    unsigned cp;
    if (c < 0x80) return 1;
    if (c >= 0xc2 && c <= 0xdf) {
        n = 2;
        cp = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
        n = 3;
        cp = c & 0x0f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        n = 4;
        cp = c & 0x07;
    } else {
        return 0;
    }
    for (int i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0; /* also stops at the NUL */
        cp = cp << 6 | (s[i] & 0x3fu);
    }
    if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff))) return 0;
    if ((cp >= 0xd800 && cp <= 0xdfff) || cp == 0xfffe || cp == 0xffff) return 0;
    return n;
}

void sf_strbuf_put_xml(sf_strbuf *b, const char *s) {
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        const char *ent = NULL;
        switch (*p) {
        case '&': ent = "&amp;"; break;
        case '<': ent = "&lt;"; break;
        case '>': ent = "&gt;"; break;
        case '"': ent = "&quot;"; break;
        case '\'': ent = "&apos;"; break;
        default: break;
        }
        if (ent) {
            sf_strbuf_puts(b, ent);
            p++;
            continue;
        }
        if (*p < 0x20) {
            sf_strbuf_add(b, " ", 1);
            p++;
            continue;
        }
        int n = utf8_valid_len(p);
        if (n == 0) {
            sf_strbuf_add(b, "\xef\xbf\xbd", 3); /* U+FFFD for one bad byte */
            p++;
        } else {
            sf_strbuf_add(b, (const char *)p, (size_t)n);
            p += n;
        }
    }
}

void sf_strbuf_put_dot(sf_strbuf *b, const char *s) {
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') {
            char e[2] = {'\\', *s};
            sf_strbuf_add(b, e, 2);
        } else if (*s == '\n') {
            sf_strbuf_add(b, "\\n", 2);
        } else if (*s != '\r') {
            sf_strbuf_add(b, s, 1);
        }
    }
}

char *sf_fmt_bytes(double bytes, char *buf, size_t n) {
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    int u = 0;
    double v = bytes;
    while (v >= 1024.0 && u < 5) {
        v /= 1024.0;
        u++;
    }
    if (u == 0)
        snprintf(buf, n, "%.0f B", v);
    else
        snprintf(buf, n, "%.*f %s", v < 100.0 ? 2 : 1, v, units[u]);
    return buf;
}
