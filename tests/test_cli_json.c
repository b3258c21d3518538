/*
 * test_cli_json.c - the rule every command's JSON follows (src/cli/cli.c): a
 * number that is not finite becomes null with its reason in "null_reasons",
 * never a missing key. jansson's json_real refuses NaN and infinities (NULL),
 * and json_object_set_new of NULL drops the key without a word, which is how
 * `train --json` of a diverged run lost loss_last and most of its losses.
 *
 * cli.c is the command line's, not the library's, so it is compiled in here.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "cli/cli.c"

static void test_json_numbers(void **state) {
    (void)state;
    json_t *j = json_object();
    assert_non_null(j);
    assert_int_equal(sf_cli_json_set_number(j, "whole", 3.0), 0);
    assert_int_equal(sf_cli_json_set_real(j, "real", 2.0), 0);
    assert_int_equal(sf_cli_json_set_number(j, "nan", NAN), 0);
    assert_int_equal(sf_cli_json_set_real(j, "inf", INFINITY), 0);
    assert_int_equal(sf_cli_json_set_number(j, "minf", -INFINITY), 0);
    json_t *arr = json_array();
    assert_int_equal(json_array_append_new(arr, sf_cli_json_number(NAN)), 0);
    assert_int_equal(json_object_set_new(j, "losses", arr), 0);
    assert_true(json_is_integer(json_object_get(j, "whole")));
    assert_true(json_is_real(json_object_get(j, "real")));
    /* every key is there: null for what is not a number, with the reason */
    assert_true(json_is_null(json_object_get(j, "nan")));
    assert_true(json_is_null(json_object_get(j, "inf")));
    assert_true(json_is_null(json_object_get(j, "minf")));
    assert_true(json_is_null(json_array_get(arr, 0)));
    json_t *why = json_object_get(j, "null_reasons");
    assert_non_null(why);
    assert_string_equal(json_string_value(json_object_get(why, "nan")), "NaN");
    assert_string_equal(json_string_value(json_object_get(why, "inf")), "+Inf");
    assert_string_equal(json_string_value(json_object_get(why, "minf")), "-Inf");
    assert_null(json_object_get(why, "whole"));
    assert_int_equal(json_object_size(why), 3);
    /* the text is JSON a strict reader takes */
    char *text = json_dumps(j, JSON_REAL_PRECISION(17));
    assert_non_null(text);
    json_error_t e;
    json_t *back = json_loads(text, 0, &e);
    assert_non_null(back);
    assert_true(json_equal(back, j));
    json_decref(back);
    free(text);
    assert_int_equal(sf_cli_json_null_reason(j, "test_accuracy", "not evaluated"), 0);
    assert_string_equal(json_string_value(json_object_get(why, "test_accuracy")), "not evaluated");
    json_decref(j);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_json_numbers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
