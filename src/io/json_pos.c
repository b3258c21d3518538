/*
 * json_pos.c - find where a member or element of a JSON document starts in its
 * raw text, so that a reader can say "model.json:14:9: ..." about a value that
 * parsed but means nothing (json_pos.h).
 *
 * jansson gives a line and a column for syntax errors only; the values it
 * returns carry no positions. The readers of the model and strategy formats
 * therefore check the jansson tree and, only when something is wrong, walk the
 * raw text once along the path of the offending value, such as ops[12].kernel or
 * ops."conv3".degrees[1]. Loading a good file costs one jansson parse and
 * nothing more.
 *
 * Alternatives rejected: a second JSON parser that records the position of
 * every value (a parser to keep in step with jansson, and memory spent on every
 * load for the rare bad one); and a copy of this scanner in each reader, which
 * is what there was, and the copies had drifted in how they skipped strings and
 * matched keys.
 *
 * The scanner is not a validator. It skips values by counting brackets without
 * matching their kinds and matches keys by decoding the simple escapes (a \u
 * escape never matches: a position is a courtesy, and the caller then points at
 * the parent). On text jansson accepted it is exact; on anything else it still
 * stops within len and answers with the deepest step it did find. Both the key
 * and the value of that step are returned: the model reader points at a
 * member's key, the strategy reader at an enclosing member's value, and either
 * policy is one line in the caller rather than a flag here.
 */
#include "json_pos.h"

#include <string.h>

typedef struct scan {
    const char *s;
    size_t n, i; /* text length and cursor, in bytes; i may reach n, never pass it */
} scan;

static void sc_ws(scan *c) {
    while (c->i < c->n &&
           (c->s[c->i] == ' ' || c->s[c->i] == '\t' || c->s[c->i] == '\n' || c->s[c->i] == '\r'))
        c->i++;
}

/* At an opening quote: move past the closing one. 0, or -1 when the text ends
 * first (the cursor is then at the end). */
static int sc_string(scan *c) {
    c->i++;
    while (c->i < c->n) {
        char ch = c->s[c->i];
        if (ch == '\\') {
            c->i += 2;
        } else {
            c->i++;
            if (ch == '"') return 0;
        }
    }
    c->i = c->n;
    return -1;
}

/* Skip one value of any kind: 0, or -1 when there is none or the text ends
 * inside it. */
static int sc_value(scan *c) {
    sc_ws(c);
    if (c->i >= c->n) return -1;
    char ch = c->s[c->i];
    if (ch == '"') return sc_string(c);
    if (ch == '{' || ch == '[') {
        size_t depth = 0;
        while (c->i < c->n) {
            ch = c->s[c->i];
            if (ch == '"') {
                if (sc_string(c) < 0) return -1;
                continue;
            }
            c->i++;
            if (ch == '{' || ch == '[') {
                depth++;
            } else if (ch == '}' || ch == ']') {
                if (--depth == 0) return 0;
            }
        }
        return -1;
    }
    size_t start = c->i;
    while (c->i < c->n && !strchr(",]} \t\r\n", c->s[c->i])) c->i++;
    return c->i > start ? 0 : -1;
}

/* At '"': whether the string token decodes to `key`. The simple escapes are
 * decoded; \u and anything malformed never match. */
static int sc_key_is(const scan *c, const char *key) {
    static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
    size_t i = c->i + 1, k = 0;
    while (i < c->n && c->s[i] != '"') {
        char ch = c->s[i];
        if (ch == '\\') {
            if (i + 1 >= c->n) return 0;
            const char *hit = c->s[i + 1] ? strchr(from, c->s[i + 1]) : NULL;
            if (!hit) return 0;
            ch = to[hit - from];
            i += 2;
        } else {
            i++;
        }
        /* key[k] == '\0' ends the key: a raw NUL in the text must not walk past it */
        if (key[k] == '\0' || key[k] != ch) return 0;
        k++;
    }
    return i < c->n && key[k] == '\0';
}

/* At '{': find member `key`. Returns 1 with *key_at on its key's opening quote
 * and the cursor on its value, or 0. */
static int sc_member(scan *c, const char *key, size_t *key_at) {
    c->i++;
    for (;;) {
        sc_ws(c);
        if (c->i >= c->n || c->s[c->i] != '"') return 0;
        size_t at = c->i;
        int match = sc_key_is(c, key);
        if (sc_string(c) < 0) return 0;
        sc_ws(c);
        if (c->i >= c->n || c->s[c->i] != ':') return 0;
        c->i++;
        sc_ws(c);
        if (match) {
            *key_at = at;
            return 1;
        }
        if (sc_value(c) < 0) return 0;
        sc_ws(c);
        if (c->i >= c->n || c->s[c->i] != ',') return 0;
        c->i++;
    }
}

/* At '[': find element `index`. Returns 1 with the cursor on it, or 0. */
static int sc_element(scan *c, size_t index) {
    c->i++;
    for (size_t e = 0;; e++) {
        sc_ws(c);
        if (c->i >= c->n || c->s[c->i] == ']') return 0;
        if (e == index) return 1;
        if (sc_value(c) < 0) return 0;
        sc_ws(c);
        if (c->i >= c->n || c->s[c->i] != ',') return 0;
        c->i++;
    }
}

sf_json_pos sf_json_locate(const char *text, size_t len, const sf_json_step *path, int n_path) {
    scan c = {text, text ? len : 0, 0};
    sc_ws(&c);
    sf_json_pos pos = {0, c.i, c.i};
    for (int k = 0; k < n_path; k++) {
        sc_ws(&c);
        if (c.i >= c.n) break;
        size_t key_at = c.i;
        if (path[k].key) {
            if (c.s[c.i] != '{' || !sc_member(&c, path[k].key, &key_at)) break;
        } else {
            if (c.s[c.i] != '[' || !sc_element(&c, path[k].index)) break;
            key_at = c.i;
        }
        pos.depth = k + 1;
        pos.key = key_at;
        pos.value = c.i;
    }
    return pos;
}

void sf_json_line_col(const char *text, size_t len, size_t off, int *line, int *col) {
    int l = 1, cc = 1;
    if (!text || off > len) off = text ? len : 0;
    for (size_t i = 0; i < off; i++) {
        unsigned char ch = (unsigned char)text[i];
        if (ch == '\n') {
            l++;
            cc = 1;
        } else if ((ch & 0xC0) != 0x80) {
            cc++;
        }
    }
    *line = l;
    *col = cc;
}
