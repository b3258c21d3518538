/* Positions in raw JSON text (src/io/json_pos.c): each kind of path step lands
 * on the byte it documents, lines and columns count CRLF and UTF-8 as jansson
 * does, and any truncation or corruption of a document still gives an answer
 * inside the text without reading past it (run under ASan, the copies below
 * have no terminating NUL to hide an over-read). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "io/json_pos.h"

/* "\xc3\xa9" is one character (e acute) in two bytes: columns after it count 1. */
static const char DOC[] = "{\"a\": 1,\r\n"
                          " \"\xc3\xa9\": \"\xc3\xbc\", \"ops\": [ {\"kernel\": [3, 3]},\n"
                          "\t{\"na\\\"me\": {\"x\": [1]}, \"kernel\" :\t[5,\n"
                          "  7]} ], \"\\u0061\": 2}";

/* Byte offset of the n-th (0-based) occurrence of `needle` in DOC. */
static size_t at(const char *needle, int n) {
    const char *p = DOC;
    for (int k = 0;; k++) {
        p = strstr(p, needle);
        assert_non_null(p);
        if (k == n) return (size_t)(p - DOC);
        p++;
    }
}

static sf_json_pos locate(const sf_json_step *path, int n) {
    return sf_json_locate(DOC, sizeof DOC - 1, path, n);
}

static void test_steps(void **state) {
    (void)state;
    /* ops[1].kernel: a member's key is its opening quote, its value after the blanks */
    sf_json_step k[4] = {{"ops", 0}, {NULL, 1}, {"kernel", 0}, {NULL, 1}};
    sf_json_pos p = locate(k, 3);
    assert_int_equal(p.depth, 3);
    assert_int_equal(p.key, at("\"kernel\"", 1));
    assert_int_equal(p.value, at("[5,", 0));
    /* ops[1].kernel[1]: an element is its own key */
    p = locate(k, 4);
    assert_int_equal(p.depth, 4);
    assert_int_equal(p.key, at("7]", 0));
    assert_int_equal(p.value, p.key);
    /* an escaped key matches its decoded name */
    sf_json_step e[4] = {{"ops", 0}, {NULL, 1}, {"na\"me", 0}, {"x", 0}};
    p = locate(e, 4);
    assert_int_equal(p.depth, 4);
    assert_int_equal(p.key, at("\"x\"", 0));
    /* a missing element stops at the deepest step found */
    sf_json_step m[2] = {{"ops", 0}, {NULL, 2}};
    p = locate(m, 2);
    assert_int_equal(p.depth, 1);
    assert_int_equal(p.key, at("\"ops\"", 0));
    assert_int_equal(p.value, at("[ {", 0));
    /* a missing member, or a step of the wrong kind, stops at the root */
    sf_json_step z[1] = {{"zzz", 0}};
    p = locate(z, 1);
    assert_int_equal(p.depth, 0);
    assert_int_equal(p.key, 0);
    assert_int_equal(p.value, 0);
    sf_json_step w[1] = {{NULL, 0}};
    assert_int_equal(locate(w, 1).depth, 0);
    /* \u escapes are not decoded: such a key is never found, its parent is */
    sf_json_step a[2] = {{"b", 0}, {"a", 0}};
    static const char u[] = "{\"b\": {\"\\u0061\": 1}}";
    p = sf_json_locate(u, sizeof u - 1, a, 2);
    assert_int_equal(p.depth, 1);
    assert_int_equal(p.value, 6);
    /* no path: the root value, after leading blanks */
    p = sf_json_locate(" \n {}", 5, NULL, 0);
    assert_int_equal(p.depth, 0);
    assert_int_equal(p.key, 3);
}

static void test_line_col(void **state) {
    (void)state;
    int line, col;
    sf_json_line_col(DOC, sizeof DOC - 1, 0, &line, &col);
    assert_int_equal(line, 1);
    assert_int_equal(col, 1);
    /* "\r\n" is one line break; the "\r" is a character of the line it ends */
    sf_json_line_col(DOC, sizeof DOC - 1, at("\"ops\"", 0), &line, &col);
    assert_int_equal(line, 2);
    assert_int_equal(col, 12); /* ` "e": "u", ` is 11 characters in 13 bytes */
    sf_json_line_col(DOC, sizeof DOC - 1, at("7]", 0), &line, &col);
    assert_int_equal(line, 4);
    assert_int_equal(col, 3);
    /* an offset past the text is clamped to its end */
    int l2, c2;
    sf_json_line_col(DOC, sizeof DOC - 1, sizeof DOC - 1, &line, &col);
    sf_json_line_col(DOC, sizeof DOC - 1, 100000, &l2, &c2);
    assert_int_equal(l2, line);
    assert_int_equal(c2, col);
}

/* Every prefix of the document, and the document with each byte replaced by
 * each troublesome one: the answer stays inside the text, and ASan sees no
 * read past the exact-size copy. */
static void test_malformed(void **state) {
    (void)state;
    const size_t n = sizeof DOC - 1;
    sf_json_step paths[3][4] = {{{"ops", 0}, {NULL, 1}, {"kernel", 0}, {NULL, 1}},
                                {{"ops", 0}, {NULL, 1}, {"na\"me", 0}, {"x", 0}},
                                {{"a", 0}, {NULL, 7}, {"", 0}, {NULL, 0}}};
    const char bad[] = "\"\\{}[],: \n\0";
    char *buf = malloc(n ? n : 1);
    assert_non_null(buf);
    for (size_t len = 0; len <= n; len++) {
        for (size_t b = 0; b <= len && b < n; b++) {
            for (size_t r = 0; r < sizeof bad; r++) {
                memcpy(buf, DOC, len);
                if (b < len && r < sizeof bad - 1) buf[b] = bad[r];
                if (b < len && r == sizeof bad - 1) buf[b] = (char)0x80;
                for (int q = 0; q < 3; q++) {
                    sf_json_pos p = sf_json_locate(buf, len, paths[q], 4);
                    assert_true(p.depth >= 0 && p.depth <= 4);
                    assert_true(p.key <= len && p.value <= len);
                    int line, col;
                    sf_json_line_col(buf, len, p.value, &line, &col);
                    assert_true(line >= 1 && col >= 1);
                }
                if (b == len) break; /* the plain prefix: nothing to replace */
            }
        }
    }
    free(buf);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_steps),
        cmocka_unit_test(test_line_col),
        cmocka_unit_test(test_malformed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
