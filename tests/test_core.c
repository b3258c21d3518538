/* Core: status strings, error messages, arena, RNG determinism and range, string buffer. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
/* cmocka needs setjmp.h, stdarg.h and stddef.h first */
#include <cmocka.h>

#include "soapflow/core.h"

static void test_status_strings(void **state) {
    (void)state;
    assert_string_equal(sf_status_str(SF_OK), "ok");
    assert_string_equal(sf_status_str(SF_ERR_NOMEM), "out of memory");
    assert_string_equal(sf_status_str((sf_status)-100), "unknown status");
    for (int s = 0; s >= SF_STATUS_MIN; s--) assert_non_null(sf_status_str((sf_status)s));
}

static void test_error_first_wins(void **state) {
    (void)state;
    sf_error e = {0};
    assert_int_equal(sf_error_set(&e, SF_ERR_PARSE, "line %d", 3), SF_ERR_PARSE);
    sf_error_set(&e, SF_ERR_IO, "second");
    assert_int_equal(e.code, SF_ERR_PARSE);
    sf_error_prefix(&e, "%s: ", "m.json");
    assert_string_equal(e.msg, "m.json: line 3");
    sf_error_clear(&e);
    assert_int_equal(e.code, SF_OK);
    assert_int_equal(sf_error_set(NULL, SF_ERR_IO, "x"), SF_ERR_IO);
}

/* A message quotes its input, and input may hold control characters: they
 * come out as C escapes, so that the message stays one line and cannot drive
 * a terminal (the fuzzers found a newline in an operator's name, in a JSON
 * key, and in the text jansson quotes near a syntax error). */
static void test_error_one_line(void **state) {
    (void)state;
    sf_error e = {0};
    sf_error_set(&e, SF_ERR_NOTFOUND, "unknown input '%s'", "toke\ns\t\r\x1b[31m\x7f");
    assert_string_equal(e.msg, "unknown input 'toke\\ns\\t\\r\\x1b[31m\\x7f'");
    sf_error_prefix(&e, "%s: ", "dir\nname.json");
    assert_string_equal(e.msg, "dir\\nname.json: unknown input 'toke\\ns\\t\\r\\x1b[31m\\x7f'");
    /* UTF-8 is not touched; a message too long for the buffer is cut, not overrun */
    sf_error_clear(&e);
    sf_error_set(&e, SF_ERR_PARSE, "caf\xc3\xa9");
    assert_string_equal(e.msg, "caf\xc3\xa9");
    char lines[2 * SF_ERRMSG_MAX];
    memset(lines, '\n', sizeof lines - 1);
    lines[sizeof lines - 1] = '\0';
    sf_error_clear(&e);
    sf_error_set(&e, SF_ERR_PARSE, "%s", lines);
    assert_int_equal(strlen(e.msg), SF_ERRMSG_MAX - 1 - (SF_ERRMSG_MAX - 1) % 2);
    assert_null(strchr(e.msg, '\n'));
}

static void test_arena(void **state) {
    (void)state;
    sf_arena *a = sf_arena_new(64);
    assert_non_null(a);
    unsigned char *p = sf_arena_alloc(a, 10);
    assert_non_null(p);
    assert_int_equal((uintptr_t)p % 16, 0);
    for (int i = 0; i < 10; i++) assert_int_equal(p[i], 0);
    void *big = sf_arena_alloc(a, 100000); /* bigger than a block */
    assert_non_null(big);
    assert_null(sf_arena_calloc(a, SIZE_MAX / 2, 4)); /* overflow */
    char *s = sf_arena_strdup(a, "hello");
    assert_string_equal(s, "hello");
    assert_true(sf_arena_used(a) >= 100000);
    sf_arena_free(a);
    sf_arena_free(NULL);
}

static void test_rng(void **state) {
    (void)state;
    sf_rng a, b;
    sf_rng_seed(&a, 7);
    sf_rng_seed(&b, 7);
    for (int i = 0; i < 100; i++) assert_true(sf_rng_next(&a) == sf_rng_next(&b));
    sf_rng_seed(&b, 8);
    assert_true(sf_rng_next(&a) != sf_rng_next(&b));
    int counts[5] = {0};
    for (int i = 0; i < 50000; i++) {
        uint64_t x = sf_rng_below(&a, 5);
        assert_true(x < 5);
        counts[x]++;
        double u = sf_rng_uniform(&a);
        assert_true(u >= 0 && u < 1);
    }
    for (int i = 0; i < 5; i++) assert_in_range(counts[i], 9000, 11000);
}

static void test_overflow(void **state) {
    (void)state;
    int64_t r;
    assert_int_equal(sf_mul_overflow_i64(INT64_MAX, 2, &r), -1);
    assert_int_equal(sf_mul_overflow_i64(1 << 20, 1 << 20, &r), 0);
    assert_true(r == (int64_t)1 << 40);
}

static void test_strbuf_appends(void **state) {
    (void)state;
    sf_strbuf b = {0};
    sf_strbuf_puts(&b, "ab");
    sf_strbuf_add(&b, "cdef", 2); /* only n bytes */
    sf_strbuf_add(&b, "", 0);
    sf_strbuf_printf(&b, "[%d %s %.1f]", -7, "x", 2.5);
    assert_string_equal(b.s, "abcd[-7 x 2.5]");
    assert_int_equal(b.len, strlen(b.s));
    assert_true(b.cap > b.len);
    assert_int_equal(b.oom, 0);
    /* past the first block: every piece lands, in order */
    for (int i = 0; i < 2000; i++) sf_strbuf_printf(&b, "%04d,", i);
    assert_int_equal(b.len, 14 + 2000 * 5);
    assert_memory_equal(b.s + 14, "0000,0001,", 10);
    assert_memory_equal(b.s + b.len - 5, "1999,", 5);
    assert_int_equal(b.s[b.len], '\0');
    sf_strbuf_free(&b);
    assert_null(b.s);
    assert_int_equal(b.len, 0);
    assert_int_equal(b.cap, 0);
}

/* A formatted piece longer than any temporary or than the free room: first into an
 * empty buffer, then into one whose spare room is smaller than the piece. */
static void test_strbuf_long_printf(void **state) {
    (void)state;
    enum { LONG = 10000 };
    char *big = malloc(LONG + 1);
    assert_non_null(big);
    for (int i = 0; i < LONG; i++) big[i] = (char)('a' + i % 26);
    big[LONG] = '\0';
    sf_strbuf b = {0};
    sf_strbuf_printf(&b, "<%s>", big);
    assert_int_equal(b.len, LONG + 2);
    sf_strbuf_printf(&b, "%s|%d", big, 42);
    assert_int_equal(b.len, 2 * LONG + 5);
    assert_int_equal(b.oom, 0);
    assert_int_equal(b.s[0], '<');
    assert_memory_equal(b.s + 1, big, LONG);
    assert_memory_equal(b.s + LONG + 1, ">", 1);
    assert_memory_equal(b.s + LONG + 2, big, LONG);
    assert_string_equal(b.s + 2 * LONG + 2, "|42");
    sf_strbuf_free(&b);
    free(big);
}

static void test_strbuf_take(void **state) {
    (void)state;
    sf_strbuf b = {0};
    char *empty = sf_strbuf_take(&b); /* nothing appended: "", not NULL */
    assert_non_null(empty);
    assert_string_equal(empty, "");
    free(empty);
    sf_strbuf_printf(&b, "%s=%d", "n", 3);
    char *s = sf_strbuf_take(&b);
    assert_string_equal(s, "n=3");
    assert_null(b.s); /* taken: b is empty and reusable */
    assert_int_equal(b.len, 0);
    sf_strbuf_puts(&b, "again");
    assert_string_equal(b.s, "again");
    free(s);
    /* once oom is set, appends are ignored and take gives NULL (and frees) */
    b.oom = 1;
    sf_strbuf_puts(&b, "lost");
    sf_strbuf_printf(&b, "%d", 1);
    assert_string_equal(b.s, "again");
    assert_null(sf_strbuf_take(&b));
    assert_null(b.s);
    assert_int_equal(b.oom, 0);
}

/* The picture escapes: every character XML or DOT gives a meaning is escaped,
 * control characters and bytes that are not UTF-8 cannot reach an SVG, and valid
 * UTF-8 passes unchanged. */
static void test_strbuf_escapes(void **state) {
    (void)state;
    sf_strbuf b = {0};
    sf_strbuf_put_xml(&b, "R&D <v2> \"q\" 'a'");
    assert_string_equal(b.s, "R&amp;D &lt;v2&gt; &quot;q&quot; &apos;a&apos;");
    sf_strbuf_free(&b);
    sf_strbuf_put_xml(&b, "a\tb\x01"
                          "c\n");
    assert_string_equal(b.s, "a b c ");
    sf_strbuf_free(&b);
    /* caf\u00e9, a euro sign and an emoji stay; a lone continuation byte, a
     * truncated sequence, an overlong '/', a surrogate and U+FFFF do not */
    sf_strbuf_put_xml(&b, "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
    assert_string_equal(b.s, "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
    sf_strbuf_free(&b);
    sf_strbuf_put_xml(&b, "\x80|\xe2\x82|\xc0\xaf|\xed\xa0\x80|\xef\xbf\xbf|\xff");
    for (const char *p = b.s; *p; p++) {
        unsigned char c = (unsigned char)*p;
        if (c == 0xef) { /* only U+FFFD may start with EF here */
            assert_memory_equal(p, "\xef\xbf\xbd", 3);
            p += 2;
        } else {
            assert_true(c == '|');
        }
    }
    sf_strbuf_free(&b);
    sf_strbuf_put_dot(&b, "a\"b\\c\nd\re");
    assert_string_equal(b.s, "a\\\"b\\\\c\\nde");
    sf_strbuf_free(&b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_status_strings),
        cmocka_unit_test(test_error_first_wins),
        cmocka_unit_test(test_error_one_line),
        cmocka_unit_test(test_arena),
        cmocka_unit_test(test_rng),
        cmocka_unit_test(test_overflow),
        cmocka_unit_test(test_strbuf_appends),
        cmocka_unit_test(test_strbuf_long_printf),
        cmocka_unit_test(test_strbuf_take),
        cmocka_unit_test(test_strbuf_escapes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
