/* test_json.c: cmocka tests for src/util/json.c: parsing, printing, Kubernetes number semantics,
 * limits, malformed input and RFC 6901 pointers. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "json.h"
#include "testutil.h"

/* Parse text (with explicit length) that must be rejected; return the error message. */
static void expect_invalid(const char *text, size_t len, char *err, size_t errlen)
{
    memset(err, 'Z', errlen);
    err[errlen - 1] = '\0';
    hj *v = hj_parse(text, len, err, errlen);
    if (v) {
        hj_free(v);
        fail_msg("accepted invalid JSON (len %zu): %.*s", len, (int)len, text);
    }
    if (strncmp(err, "invalid JSON", 12) != 0)
        fail_msg("message does not start with \"invalid JSON\": %s", err);
    assert_null(strchr(err, '\n'));
    assert_null(strchr(err, '\r'));
    assert_true(strlen(err) > strlen("invalid JSON"));
}

static char *nested(int depth, char open, char close, const char *inner)
{
    size_t il = strlen(inner);
    char *s = malloc((size_t)depth * 2 + il + 1);
    assert_non_null(s);
    memset(s, open, (size_t)depth);
    memcpy(s + depth, inner, il);
    memset(s + depth + il, close, (size_t)depth);
    s[depth * 2 + il] = '\0';
    return s;
}

/* ---- round trips ------------------------------------------------------------------------ */

static void test_roundtrip_compact_is_byte_identical(void **state)
{
    static const char *const docs[] = {
        "{\"a\":[1,2.50,-0,1e3,1E-7,\"x\\\"y\",true,false,null],\"b\":{},\"c\":[]}",
        "[]",
        "{}",
        "0",
        "-12",
        "\"plain\"",
        "null",
        "true",
        "{\"z\":1,\"a\":2,\"m\":{\"k\":[{\"q\":\"w\"}]}}",
        "{\"path\":\"/etc/motd\",\"u\":\"caf\xc3\xa9\"}",
        "[4096,4096.0,4.096e3,40960e-1]",
    };
    for (size_t k = 0; k < sizeof(docs) / sizeof(docs[0]); k++) {
        hj *v = tu_json(docs[k]);
        tu_assert_dump(v, docs[k]);
        hj_free(v);
    }
}

static void test_roundtrip_whitespace_removed_order_kept(void **state)
{
    const char *in = " { \"b\" : [ 1 , 2 ] ,\n\t\"a\" : { \"c\" : null } } \n";
    hj *v = tu_json(in);
    assert_int_equal(v->type, HJ_OBJECT);
    assert_int_equal(v->n, 2);
    assert_string_equal(v->keys[0], "b");
    assert_string_equal(v->keys[1], "a");
    tu_assert_dump(v, "{\"b\":[1,2],\"a\":{\"c\":null}}");
    hj_free(v);
}

static void test_roundtrip_parse_dump_parse_equal(void **state)
{
    /* Escapes are normalised by the printer; the value must survive a second parse. */
    const char *in = "{\"s\":\"tab\\tnl\\nq\\\"bs\\\\u\\u00e9ctl\\u0001sl\\/\",\"n\":[1.5e10,-3]}";
    hj *a = tu_json(in);
    assert_string_equal(hj_get_str(a, "s"), "tab\tnl\nq\"bs\\u\xc3\xa9"
                                            "ctl\x01sl/");
    size_t len;
    char *text = hj_dump(a, &len);
    assert_non_null(text);
    assert_int_equal(len, strlen(text));
    hj *b = tu_json(text);
    assert_true(hj_equal(a, b));
    free(text);
    hj_free(a);
    hj_free(b);
}

static void test_clone_is_deep_and_equal(void **state)
{
    hj *a = tu_json("{\"x\":{\"y\":[1,2.0,\"s\"]},\"f\":1.25}");
    hj *b = hj_clone(a);
    assert_true(a != b);
    assert_true(hj_equal(a, b));
    tu_assert_dump(b, "{\"x\":{\"y\":[1,2.0,\"s\"]},\"f\":1.25}");
    /* Changing the clone leaves the original alone. */
    tu_set(b, "/x/y/0", "7");
    assert_false(hj_equal(a, b));
    tu_assert_dump(a, "{\"x\":{\"y\":[1,2.0,\"s\"]},\"f\":1.25}");
    hj_free(a);
    hj_free(b);
    assert_null(hj_clone(NULL));
}

static void test_builders(void **state)
{
    hj *o = hj_new_object();
    hj_obj_set_take(o, "i", hj_new_int(-9223372036854775807LL - 1));
    hj_obj_set_take(o, "s", hj_new_string("a\"b"));
    hj_obj_set_take(o, "n", hj_new_stringn("abcdef", 3));
    hj_obj_set_take(o, "b", hj_new_bool(true));
    hj_obj_set_take(o, "z", hj_new_null());
    hj *arr = hj_new_array();
    hj_arr_push_take(arr, hj_new_int(1));
    hj_arr_push_take(arr, hj_new_int(0));
    hj_obj_set_take(o, "a", arr);
    hj_obj_set_take(o, "s", hj_new_string("replaced")); /* same key: replaced in place */
    tu_assert_dump(o, "{\"i\":-9223372036854775808,\"s\":\"replaced\",\"n\":\"abc\",\"b\":true,"
                      "\"z\":null,\"a\":[1,0]}");
    assert_true(hj_obj_del(o, "n"));
    assert_false(hj_obj_del(o, "n"));
    assert_false(hj_obj_del(arr, "x"));
    assert_false(hj_obj_del(NULL, "x"));
    tu_assert_dump(o, "{\"i\":-9223372036854775808,\"s\":\"replaced\",\"b\":true,\"z\":null,"
                      "\"a\":[1,0]}");
    assert_true(hj_obj_del(o, "i"));
    assert_true(hj_obj_del(o, "a"));
    tu_assert_dump(o, "{\"s\":\"replaced\",\"b\":true,\"z\":null}");
    hj_free(o);
    hj_free(NULL);
}

/* ---- Kubernetes number semantics -------------------------------------------------------- */

static void test_int_and_float_literals_differ(void **state)
{
    hj *i = tu_json("4096"), *f = tu_json("4096.0"), *i2 = tu_json("4096");
    assert_int_equal(i->type, HJ_INT);
    assert_int_equal(i->i, 4096);
    assert_int_equal(f->type, HJ_FLOAT);
    assert_true(f->f == 4096.0);
    assert_false(hj_equal(i, f));
    assert_false(hj_equal(f, i));
    assert_true(hj_equal(i, i2));
    tu_assert_dump(i, "4096");
    tu_assert_dump(f, "4096.0");
    hj_free(i);
    hj_free(f);
    hj_free(i2);

    /* Same in a tree: only the number's kind differs. */
    hj *a = tu_json("{\"spec\":{\"memoryMiB\":4096}}");
    hj *b = tu_json("{\"spec\":{\"memoryMiB\":4096.0}}");
    hj *c = tu_json("{\"spec\":{\"memoryMiB\":4096}}");
    assert_false(hj_equal(a, b));
    assert_true(hj_equal(a, c));
    hj_free(a);
    hj_free(b);
    hj_free(c);
}

static void test_float_spellings_compare_by_value(void **state)
{
    hj *a = tu_json("4096.0"), *b = tu_json("4.096e3"), *c = tu_json("4096.5");
    assert_int_equal(b->type, HJ_FLOAT);
    assert_true(hj_equal(a, b));
    assert_false(hj_equal(a, c));
    tu_assert_dump(b, "4.096e3"); /* printed verbatim, not normalised */
    hj_free(a);
    hj_free(b);
    hj_free(c);
    hj *e = tu_json("1E3"), *e2 = tu_json("1000");
    assert_int_equal(e->type, HJ_FLOAT);
    assert_false(hj_equal(e, e2));
    hj_free(e);
    hj_free(e2);
}

static void test_int64_limits(void **state)
{
    hj *max = tu_json("9223372036854775807");
    assert_int_equal(max->type, HJ_INT);
    assert_true(max->i == INT64_MAX);
    tu_assert_dump(max, "9223372036854775807");

    hj *min = tu_json("-9223372036854775808");
    assert_int_equal(min->type, HJ_INT);
    assert_true(min->i == INT64_MIN);
    tu_assert_dump(min, "-9223372036854775808");

    hj *over = tu_json("9223372036854775808");
    assert_int_equal(over->type, HJ_FLOAT);
    assert_true(over->f == 9223372036854775808.0);
    tu_assert_dump(over, "9223372036854775808");
    assert_false(hj_equal(max, over));

    hj *under = tu_json("-9223372036854775809");
    assert_int_equal(under->type, HJ_FLOAT);
    tu_assert_dump(under, "-9223372036854775809");

    hj *huge = tu_json("[123456789012345678901234567890123456789012345678901234567890123456789]");
    assert_int_equal(huge->items[0]->type, HJ_FLOAT);
    tu_assert_dump(huge, "[123456789012345678901234567890123456789012345678901234567890123456789]");

    /* integers beyond 2^53 compare exactly, not through a double */
    hj *big = tu_json("9007199254740993"), *big2 = tu_json("9007199254740992");
    assert_int_equal(big->type, HJ_INT);
    assert_false(hj_equal(big, big2));
    hj_free(big);
    hj_free(big2);

    hj_free(max);
    hj_free(min);
    hj_free(over);
    hj_free(under);
    hj_free(huge);
}

static void test_memory_sizes_stay_integers(void **state)
{
    hj *v = tu_json("{\"bytes\":17179869184,\"kib\":16777216,\"mib\":16384}");
    const hj *b = hj_get(v, "bytes");
    assert_non_null(b);
    assert_int_equal(b->type, HJ_INT);
    assert_true(b->i == 17179869184LL);
    assert_int_equal(hj_get(v, "kib")->type, HJ_INT);
    tu_assert_dump(v, "{\"bytes\":17179869184,\"kib\":16777216,\"mib\":16384}");
    hj_free(v);
}

static void test_new_int_prints_like_parsed(void **state)
{
    hj *a = hj_new_int(17179869184LL), *b = tu_json("17179869184");
    assert_true(hj_equal(a, b));
    tu_assert_dump(a, "17179869184");
    hj_free(a);
    hj_free(b);
}

static void test_equal_structure(void **state)
{
    hj *a = tu_json("{\"a\":1,\"b\":[1,2],\"c\":{\"d\":null}}");
    hj *order = tu_json("{\"c\":{\"d\":null},\"b\":[1,2],\"a\":1}");
    hj *arr_order = tu_json("{\"a\":1,\"b\":[2,1],\"c\":{\"d\":null}}");
    hj *extra = tu_json("{\"a\":1,\"b\":[1,2],\"c\":{\"d\":null},\"e\":0}");
    hj *fewer = tu_json("{\"a\":1,\"b\":[1,2]}");
    hj *other_key = tu_json("{\"a\":1,\"b\":[1,2],\"x\":{\"d\":null}}");
    hj *strtype = tu_json("{\"a\":\"1\",\"b\":[1,2],\"c\":{\"d\":null}}");
    assert_true(hj_equal(a, order));
    assert_false(hj_equal(a, arr_order));
    assert_false(hj_equal(a, extra));
    assert_false(hj_equal(extra, a));
    assert_false(hj_equal(a, fewer));
    assert_false(hj_equal(a, other_key));
    assert_false(hj_equal(a, strtype));
    assert_false(hj_equal(a, NULL));
    assert_false(hj_equal(NULL, a));
    assert_true(hj_equal(NULL, NULL));
    hj *s1 = tu_json("\"ab\""), *s2 = tu_json("\"abc\""), *t = tu_json("true"),
       *f = tu_json("false"), *n = tu_json("null");
    assert_false(hj_equal(s1, s2));
    assert_false(hj_equal(t, f));
    assert_false(hj_equal(n, f));
    hj_free(s1);
    hj_free(s2);
    hj_free(t);
    hj_free(f);
    hj_free(n);
    hj_free(a);
    hj_free(order);
    hj_free(arr_order);
    hj_free(extra);
    hj_free(fewer);
    hj_free(other_key);
    hj_free(strtype);
}

static void test_duplicate_keys_last_wins(void **state)
{
    hj *v = tu_json("{\"a\":1,\"b\":2,\"a\":{\"x\":[3]},\"a\":\"last\"}");
    assert_int_equal(v->n, 2);
    assert_string_equal(hj_get_str(v, "a"), "last");
    tu_assert_dump(v, "{\"a\":\"last\",\"b\":2}");
    hj_free(v);
    hj *w = tu_json("{\"m\":{\"k\":1,\"k\":2.0}}");
    assert_int_equal(hj_ptr(w, "/m/k")->type, HJ_FLOAT);
    tu_assert_dump(w, "{\"m\":{\"k\":2.0}}");
    hj_free(w);
}

static void test_strings_keep_embedded_nul_escape(void **state)
{
    hj *v = tu_json("\"a\\u0000b\"");
    assert_int_equal(v->type, HJ_STRING);
    assert_int_equal(v->slen, 3);
    assert_memory_equal(v->s, "a\0b", 3);
    hj *w = tu_json("\"a\"");
    assert_false(hj_equal(v, w));
    hj_free(v);
    hj_free(w);
}

/* ---- limits and malformed input --------------------------------------------------------- */

static void test_depth_64_accepted(void **state)
{
    char *s = nested(HJ_MAX_DEPTH, '[', ']', "1");
    char err[256] = "";
    hj *v = hj_parse(s, strlen(s), err, sizeof(err));
    assert_non_null(v);
    const hj *cur = v;
    int depth = 0;
    while (cur->type == HJ_ARRAY) {
        assert_int_equal(cur->n, 1);
        cur = cur->items[0];
        depth++;
    }
    assert_int_equal(depth, 64);
    assert_int_equal(cur->type, HJ_INT);
    size_t len;
    char *text = hj_dump(v, &len);
    assert_string_equal(text, s);
    free(text);
    hj_free(v);
    free(s);
}

/* {"k0":0,"k1":1,...} with n members; caller frees. */
static char *wide_object(size_t n)
{
    char *o = malloc(n * 24 + 8), *w = o;
    assert_non_null(o);
    *w++ = '{';
    for (size_t k = 0; k < n; k++)
        w += sprintf(w, "%s\"k%zu\":%zu", k ? "," : "", k, k);
    *w++ = '}';
    *w = '\0';
    return o;
}

static void test_member_limit(void **state)
{
    char err[256];
    char *ok = wide_object(HJ_MAX_MEMBERS);
    hj *v = hj_parse(ok, strlen(ok), err, sizeof(err));
    assert_non_null(v);
    assert_int_equal(v->n, HJ_MAX_MEMBERS);
    hj_free(v);
    free(ok);
    char *big = wide_object(HJ_MAX_MEMBERS + 1);
    expect_invalid(big, strlen(big), err, sizeof(err));
    assert_non_null(strstr(err, "an object with more than 4096 members"));
    free(big);
}

/* "[0,0,...,0]" with n zeros, padded with spaces after the '[' to pad bytes in all. */
static char *dense_array(size_t n, size_t pad)
{
    size_t len = 2 * n + 1;
    if (pad < len)
        pad = len;
    char *s = malloc(pad + 1), *w = s;
    *w++ = '[';
    for (size_t k = len; k < pad; k++)
        *w++ = ' ';
    for (size_t k = 0; k < n; k++) {
        *w++ = '0';
        *w++ = k + 1 < n ? ',' : ']';
    }
    *w = '\0';
    return s;
}

/* The node budget: values (the array counts as one) up to len / 8 + 4096 parse, one more
 * is refused; the same count of values parses in a longer input. */
static void test_node_budget(void **state)
{
    char err[256];
    size_t len = 1u << 20, budget = hj_node_budget(len);
    assert_int_equal(budget, len / HJ_BYTES_PER_NODE + HJ_NODE_SLACK);
    char *ok = dense_array(budget - 1, len);
    assert_int_equal(strlen(ok), len);
    hj *v = hj_parse(ok, len, err, sizeof(err));
    assert_non_null(v);
    assert_int_equal(v->n, budget - 1);
    hj_free(v);
    free(ok);
    char *over = dense_array(budget, len);
    expect_invalid(over, len, err, sizeof(err));
    assert_non_null(strstr(err, "more values than the input's size allows (one per 8 bytes)"));
    free(over);
    /* small inputs get the slack: 4,095 values in 8 KiB parse */
    char *small = dense_array(HJ_NODE_SLACK - 1, 0);
    v = hj_parse(small, strlen(small), err, sizeof(err));
    assert_non_null(v);
    hj_free(v);
    free(small);
}

static void test_depth_65_rejected(void **state)
{
    char err[256];
    char *s = nested(HJ_MAX_DEPTH + 1, '[', ']', "");
    expect_invalid(s, strlen(s), err, sizeof(err));
    assert_non_null(strstr(err, "nesting deeper than 64 levels"));
    free(s);

    /* Objects count the same as arrays; mixing them too. */
    size_t n = 65;
    char *o = malloc(n * 6 + n + 8);
    assert_non_null(o);
    o[0] = '\0';
    for (size_t k = 0; k < n; k++)
        strcat(o, k % 2 ? "[" : "{\"a\":");
    strcat(o, "1");
    for (size_t k = n; k-- > 0;)
        strcat(o, k % 2 ? "]" : "}");
    expect_invalid(o, strlen(o), err, sizeof(err));
    assert_non_null(strstr(err, "nesting deeper than 64 levels"));
    free(o);

    /* Deeper still (no stack trouble), and a depth-65 node inside an otherwise shallow doc. */
    char *deep = nested(10000, '[', ']', "");
    expect_invalid(deep, strlen(deep), err, sizeof(err));
    free(deep);
    char *in = nested(HJ_MAX_DEPTH, '[', ']', "{}");
    expect_invalid(in, strlen(in), err, sizeof(err));
    assert_non_null(strstr(err, "nesting deeper than 64 levels"));
    free(in);
}

static void test_malformed_inputs(void **state)
{
    static const char *const bad[] = {
        "{\"a\":1",     /* truncated object */
        "[1,2",         /* truncated array */
        "{\"a\":",      /* truncated after colon */
        "\"abc",        /* unterminated string */
        "tru",          /* truncated literal */
        "{\"a\":1}x",   /* trailing garbage */
        "[1]]",         /* extra close */
        "1 2",          /* two values */
        "{} {}",        /* two values */
        "{\"a\":1}{}",  /* two values, no space */
        "",             /* empty */
        "   \n\t ",     /* only whitespace */
        "{a:1}",        /* unquoted key */
        "[1,]",         /* trailing comma */
        "[01]",         /* leading zero */
        "{\"a\" 1}",    /* missing colon */
        "'x'",          /* single quotes */
        "NaN",          /* not JSON */
        "[1.]",         /* bad number */
        "\"\\x41\"",    /* bad escape */
        "\"\\u12\"",    /* short unicode escape */
        "\"\xff\"",     /* invalid UTF-8 byte in a string */
        "\"\xc3\x28\"", /* bad continuation byte */
        "\"\xe2\x82\"", /* truncated 3-byte sequence */
        "\"a\tb\"",     /* raw control character in a string */
    };
    char err[256];
    for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++)
        expect_invalid(bad[k], strlen(bad[k]), err, sizeof(err));

    /* NUL bytes: inside a string, and between tokens (the length says they are input). */
    static const char nul_in_string[] = "{\"a\":\"x\0y\"}";
    expect_invalid(nul_in_string, sizeof(nul_in_string) - 1, err, sizeof(err));
    static const char nul_after[] = "{\"a\":1}\0";
    expect_invalid(nul_after, sizeof(nul_after) - 1, err, sizeof(err));
    static const char nul_first[] = "\0{}";
    expect_invalid(nul_first, sizeof(nul_first) - 1, err, sizeof(err));

    /* A length shorter than the text: only the prefix is parsed. */
    expect_invalid("{\"a\":1}", 6, err, sizeof(err));
    hj *ok = hj_parse("[1]garbage", 3, err, sizeof(err));
    assert_non_null(ok);
    tu_assert_dump(ok, "[1]");
    hj_free(ok);
}

static void test_error_messages_are_specific(void **state)
{
    char err[256];
    expect_invalid("1 2", 3, err, sizeof(err));
    assert_non_null(strstr(err, "garbage"));
    expect_invalid("{\"a\":1", 6, err, sizeof(err));
    assert_non_null(strstr(err, "premature EOF"));
    expect_invalid("\"\xff\"", 3, err, sizeof(err));
    assert_non_null(strstr(err, "UTF8"));
    /* errors found while parsing name the byte where yajl stopped */
    expect_invalid("[1]x", 4, err, sizeof(err));
    assert_string_equal(err, "invalid JSON at byte 4: trailing garbage");
    expect_invalid("\"\xff\"", 3, err, sizeof(err));
    /* A byte offset is given, and the message is the same every time. */
    assert_true(strncmp(err, "invalid JSON at byte ", 21) == 0);
    char err2[256];
    expect_invalid("\"\xff\"", 3, err2, sizeof(err2));
    assert_string_equal(err, err2);
}

static void test_error_message_truncated_to_buffer(void **state)
{
    char err[16];
    expect_invalid("{\"a\":", 5, err, sizeof(err));
    assert_int_equal(strlen(err), sizeof(err) - 1);
}

/* ---- pointers --------------------------------------------------------------------------- */

static void test_ptr_lookup(void **state)
{
    hj *doc = tu_json("{\"a/b\":{\"c~d\":[10,20,{\"\":5,\"e\":{\"f\":true}}]},\"~1\":7,"
                      "\"spec\":{\"template\":{\"spec\":{\"memoryMiB\":4096}}},\"\":{\"\":9}}");
    assert_true(hj_ptr(doc, "") == doc);
    assert_int_equal(hj_ptr(doc, "/a~1b/c~0d/0")->i, 10);
    assert_int_equal(hj_ptr(doc, "/a~1b/c~0d/1")->i, 20);
    assert_int_equal(hj_ptr(doc, "/a~1b/c~0d/2/")->i, 5);
    assert_true(hj_ptr(doc, "/a~1b/c~0d/2/e/f")->b);
    assert_int_equal(hj_ptr(doc, "/~01")->i, 7); /* "~01" is "~1", not "/" */
    assert_int_equal(hj_ptr(doc, "/spec/template/spec/memoryMiB")->i, 4096);
    assert_int_equal(hj_ptr(doc, "//")->i, 9);
    assert_int_equal(hj_ptr(doc, "/")->type, HJ_OBJECT);

    assert_null(hj_ptr(doc, "/a~1b/c~0d/3"));  /* past the end */
    assert_null(hj_ptr(doc, "/a~1b/c~0d/01")); /* leading zero */
    assert_null(hj_ptr(doc, "/a~1b/c~0d/-"));  /* "-" names no element */
    assert_null(hj_ptr(doc, "/a~1b/c~0d/-1"));
    assert_null(hj_ptr(doc, "/a~1b/c~0d/x"));
    assert_null(hj_ptr(doc, "/a/b"));                /* unescaped slash */
    assert_null(hj_ptr(doc, "/a~1b/c~0d/0/deeper")); /* through a scalar */
    assert_null(hj_ptr(doc, "a~1b"));                /* no leading slash */
    assert_null(hj_ptr(doc, "/a~2b"));               /* bad escape */
    assert_null(hj_ptr(doc, "/a~"));                 /* dangling escape */
    assert_null(hj_ptr(doc, "/missing"));
    assert_null(hj_ptr(NULL, "/a"));
    hj_free(doc);

    /* tokens longer than the walker's own buffer, escaped or not */
    char key[301], ptr[700], text[800];
    memset(key, 'k', 300);
    key[300] = '\0';
    key[150] = '/';
    snprintf(text, sizeof(text), "{\"%s\":{\"x\":3}}", key);
    key[150] = '\0';
    snprintf(ptr, sizeof(ptr), "/%s~1%s/x", key, key + 151);
    hj *big = tu_json(text);
    assert_int_equal(hj_ptr(big, ptr)->i, 3);
    snprintf(ptr, sizeof(ptr), "/%s~2%s/x", key, key + 151);
    assert_null(hj_ptr(big, ptr));
    hj_free(big);
}

static void test_get_helpers(void **state)
{
    hj *doc = tu_json("{\"s\":\"v\",\"n\":1,\"o\":{}}");
    assert_string_equal(hj_get_str(doc, "s"), "v");
    assert_null(hj_get_str(doc, "n"));
    assert_null(hj_get_str(doc, "x"));
    assert_non_null(hj_get(doc, "o"));
    assert_null(hj_get(hj_get(doc, "s"), "x")); /* not an object */
    assert_null(hj_get(NULL, "x"));
    assert_null(hj_get_str(NULL, "x"));
    hj_free(doc);
}

static void test_ptr_split(void **state)
{
    char **t;
    size_t n;
    assert_int_equal(hj_ptr_split("/a~1b/~0/", &t, &n), 0);
    assert_int_equal(n, 3);
    assert_string_equal(t[0], "a/b");
    assert_string_equal(t[1], "~");
    assert_string_equal(t[2], "");
    hj_ptr_tokens_free(t, n);
    assert_int_equal(hj_ptr_split("", &t, &n), 0);
    assert_int_equal(n, 0);
    hj_ptr_tokens_free(t, n);
    assert_int_equal(hj_ptr_split("x", &t, &n), -1);
    assert_int_equal(hj_ptr_split("/ok/bad~", &t, &n), -1);
    assert_int_equal(hj_ptr_split("/ok/bad~x/more", &t, &n), -1);
}

static void test_ptr_append_escapes(void **state)
{
    char buf[64] = "/spec";
    assert_true(hj_ptr_append(buf, sizeof(buf), "memoryMiB"));
    assert_string_equal(buf, "/spec/memoryMiB");
    buf[0] = '\0';
    assert_true(hj_ptr_append(buf, sizeof(buf), "a/b~c"));
    assert_string_equal(buf, "/a~1b~0c");
    assert_true(hj_ptr_append(buf, sizeof(buf), ""));
    assert_string_equal(buf, "/a~1b~0c/");
    assert_true(hj_ptr_append(buf, sizeof(buf), "~1"));
    assert_string_equal(buf, "/a~1b~0c//~01");

    /* The escaped pointer finds the key it was built from. */
    hj *doc = tu_json("{\"a/b~c\":{\"\":{\"~1\":42}}}");
    assert_non_null(hj_ptr(doc, buf));
    assert_int_equal(hj_ptr(doc, buf)->i, 42);
    hj_free(doc);

    /* Exact fit: "/ab" needs 4 bytes with the NUL. */
    char small[4] = "";
    assert_true(hj_ptr_append(small, sizeof(small), "ab"));
    assert_string_equal(small, "/ab");
    char tiny[4] = "";
    assert_false(hj_ptr_append(tiny, sizeof(tiny), "abc"));
    char esc[4] = "";
    assert_false(hj_ptr_append(esc, sizeof(esc), "a/")); /* "/a~1" needs 5 */
    char full[2] = "/";
    assert_false(hj_ptr_append(full, sizeof(full), ""));
    assert_string_equal(full, "/");
}

/* Parse text that must be rejected and return the byte offset its message names. */
static long error_offset(const char *text, char *err, size_t errlen)
{
    expect_invalid(text, strlen(text), err, errlen);
    long at = -1;
    if (sscanf(err, "invalid JSON at byte %ld:", &at) != 1)
        fail_msg("no byte offset in \"%s\"", err);
    return at;
}

/* BUG: errors that yajl only finds in yajl_complete_parse (a truncated body: premature EOF; a
 * second value at the very end: trailing garbage) name the offset inside yajl's internal
 * one-byte completion chunk, not in the input: "[1,2" gives "invalid JSON at byte 1: premature
 * EOF", "{\"a\":\"x" also byte 1, "12 34" gives byte 0. Errors found while parsing name the
 * right byte ("[1]x" -> byte 4).
 * Fix (src/util/json.c, hj_parse): remember the offset per phase, e.g.
 *     size_t at;
 *     yajl_status st = yajl_parse(h, (const unsigned char *)buf, len);
 *     at = yajl_get_bytes_consumed(h);
 *     if (st == yajl_status_ok) {
 *         st = yajl_complete_parse(h);
 *         at = len; // only found at the end of the input
 *     }
 * and print `at` instead of yajl_get_bytes_consumed(h). Kept out of the run list until fixed. */
static void test_error_offset_of_truncated_input(void **state)
{
    char err[256];
    assert_int_equal(error_offset("[1,2", err, sizeof(err)), 4);
    assert_string_equal(err, "invalid JSON at byte 4: premature EOF");
    assert_int_equal(error_offset("{\"a\":\"x", err, sizeof(err)), 7);
    long at = error_offset("12 34", err, sizeof(err));
    assert_true(at >= 3 && at <= 5); /* the second value starts at byte 3 */
}

/* BUG: hj_ptr_append writes part of the token before finding that it does not fit and then
 * returns false without restoring the terminator, so buf is left changed and, when the bytes
 * after the old end are not NUL, unterminated within cap (a later strlen reads past it).
 * Fix (src/util/json.c, hj_ptr_append): remember `size_t start = strlen(buf);` and on every
 * `return false` after writing do `buf[start] = '\0';` (or compute the escaped length first and
 * return false before writing anything). Kept out of the run list until fixed. */
static void test_ptr_append_failure_leaves_buffer_unchanged(void **state)
{
    char buf[8];
    memcpy(buf, "/a\0XXXXX", 8);
    assert_false(hj_ptr_append(buf, sizeof(buf), "bcdefgh"));
    assert_true(memchr(buf, '\0', sizeof(buf)) != NULL);
    assert_string_equal(buf, "/a");
}

/* ---- request arenas ---------------------------------------------------------------------- */

static const char arena_doc[] =
    "{\"a\":1,\"b\":[true,null,2.50,\"x\\u0041y\"],\"c\":{\"d\":{\"e\":\"f\"},\"a\":-7},"
    "\"a\":{\"again\":[]},\"\":\"empty key\"}";

static void test_arena_tree_behaves_like_a_heap_tree(void **state)
{
    hj *heap = tu_json(arena_doc);
    struct hj_arena a;
    hj_arena_begin(&a);
    char err[200];
    hj *v = hj_parse(arena_doc, strlen(arena_doc), err, sizeof(err));
    assert_non_null(v);
    assert_ptr_equal(v->arena, &a);
    assert_true(hj_equal(v, heap));
    size_t n1, n2;
    char *d1 = hj_dump(v, &n1), *d2 = hj_dump(heap, &n2);
    assert_int_equal(n1, n2);
    assert_memory_equal(d1, d2, n1);
    free(d1);
    free(d2);
    /* mutations inside the arena: replace, add, delete, clone, build */
    hj *c = hj_clone(v);
    assert_ptr_equal(c->arena, &a);
    assert_true(hj_equal(c, v));
    hj_obj_set_take(c, "a", hj_new_string("replaced"));
    for (int i = 0; i < 40; i++) { /* grows the object's arrays several times */
        char k[16];
        snprintf(k, sizeof(k), "k%d", i);
        hj_obj_set_take(c, k, hj_new_int(i));
    }
    assert_true(hj_obj_del(c, "b"));
    assert_false(hj_obj_del(c, "b"));
    assert_string_equal(hj_get_str(c, "a"), "replaced");
    assert_int_equal(hj_get(c, "k39")->i, 39);
    assert_string_equal(hj_get_str(c, ""), "empty key");
    assert_null(hj_get(c, "b"));
    assert_false(hj_equal(c, v));
    hj_free(c);
    hj_free(v);
    hj_arena_end(&a);
    /* after the arena: values are made with malloc again */
    hj *after = hj_new_object();
    assert_null(after->arena);
    hj_free(after);
    hj_free(heap);
}

static void test_arena_frees_heap_children_and_survives_errors(void **state)
{
    hj *heap_child = hj_new_string("made before the arena");
    struct hj_arena a;
    hj_arena_begin(&a);
    hj *o = hj_new_object();
    hj_obj_set_take(o, "h", heap_child); /* a longer-lived value into an arena tree: fine */
    hj_free(o);                          /* frees heap_child (LeakSanitizer checks it) */
    /* failures inside the arena: same messages as outside, nothing left behind */
    static const char *const bad[] = {"{\"a\":[1,2,{\"b\":", "{\"a\":1}x",
                                      "{\"a\":{\"a\":1,\"b\"}}"};
    char err[200], want[200];
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        hj_arena_end(&a);
        assert_null(hj_parse(bad[i], strlen(bad[i]), want, sizeof(want)));
        hj_arena_begin(&a);
        assert_null(hj_parse(bad[i], strlen(bad[i]), err, sizeof(err)));
        assert_string_equal(err, want);
    }
    hj_arena_end(&a);
}

static void test_arena_spans_many_blocks(void **state)
{
    /* ~700 KB of JSON: far more than the first block, so the arena chains larger ones (one
     * value per 11 bytes, inside the node budget like a Kubernetes object) */
    size_t cap = 1000000, len = 0;
    char *text = malloc(cap);
    assert_non_null(text);
    len += (size_t)snprintf(text + len, cap - len, "[");
    for (int i = 0; i < 20000; i++)
        len += (size_t)snprintf(text + len, cap - len, "%s{\"n\":%d,\"s\":\"value-%d\"}",
                                i ? "," : "", i, i);
    len += (size_t)snprintf(text + len, cap - len, "]");
    char err[200];
    hj *heap = hj_parse(text, len, err, sizeof(err));
    assert_non_null(heap);
    struct hj_arena a;
    hj_arena_begin(&a);
    hj *v = hj_parse(text, len, err, sizeof(err));
    assert_non_null(v);
    assert_int_equal(v->n, 20000);
    assert_true(hj_equal(v, heap));
    assert_true(a.bytes > 1u << 20);
    hj_arena_end(&a);
    hj_free(heap);
    free(text);
}

static void test_arena_value_into_a_heap_tree_aborts(void **state)
{
    /* It would dangle once the arena ends: the library stops the process instead. */
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        hj *heap = hj_new_array();
        struct hj_arena a;
        hj_arena_begin(&a);
        hj_arr_push_take(heap, hj_new_null());
        _exit(0);
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFSIGNALED(st));
    assert_int_equal(WTERMSIG(st), SIGABRT);
}

/* ---- hj_parse's own reader of the common case against yajl alone ----------------------- */

/* hj_parse reads the common case itself and falls back to yajl on anything else; it must agree
 * with yajl alone (hj_parse_yajl) on every input: both reject it with the same message, or both
 * build trees that are equal and print byte for byte the same. */
static void expect_same_as_yajl(const char *text, size_t len)
{
    char e1[256], e2[256];
    hj *a = hj_parse(text, len, e1, sizeof(e1));
    hj *b = hj_parse_yajl(text, len, e2, sizeof(e2));
    if (!a != !b)
        fail_msg("hj_parse %s, yajl alone %s (len %zu): %.*s", a ? "accepts" : e1,
                 b ? "accepts" : e2, len, (int)len, text);
    if (!a) {
        if (strcmp(e1, e2))
            fail_msg("messages differ: \"%s\" vs yajl alone \"%s\" for %.*s", e1, e2, (int)len,
                     text);
        return;
    }
    size_t la, lb;
    char *da = hj_dump(a, &la), *db = hj_dump(b, &lb);
    if (!hj_equal(a, b) || la != lb || memcmp(da, db, la))
        fail_msg("trees differ: %s vs yajl alone %s for %.*s", da, db, (int)len, text);
    free(da);
    free(db);
    hj_free(a);
    hj_free(b);
}

static uint64_t rng_next(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

struct gen {
    char *buf;
    size_t n, cap;
    uint64_t rng;
};

static void gen_put(struct gen *g, const char *s, size_t n)
{
    if (g->n + n + 1 > g->cap) {
        g->cap = (g->n + n + 1) * 2;
        g->buf = realloc(g->buf, g->cap);
        assert_non_null(g->buf);
    }
    memcpy(g->buf + g->n, s, n);
    g->n += n;
    g->buf[g->n] = '\0';
}

static void gen_puts(struct gen *g, const char *s)
{
    gen_put(g, s, strlen(s));
}

static unsigned pick(struct gen *g, unsigned n)
{
    return (unsigned)(rng_next(&g->rng) % n);
}

/* whitespace as hj_parse's reader skips it, and a few bytes it leaves to yajl */
static void gen_ws(struct gen *g)
{
    static const char *const ws[] = {"", "", "", " ", "\n  ", "\t", "\r\n", " \f", "\v"};
    gen_puts(g, ws[pick(g, 9)]);
}

static void gen_string(struct gen *g)
{
    static const char *const parts[] = {"memoryMiB",
                                        "a",
                                        "",
                                        "\\\"",
                                        "\\\\",
                                        "\\/",
                                        "\\b\\f\\n\\r\\t",
                                        "\\u0041",
                                        "\\u00e9",
                                        "\\u20ac",
                                        "\\ud83d\\ude00",
                                        "\\ud800",
                                        "\\udc00x",
                                        "\\u0000",
                                        "\\uD834\\uDD1E",
                                        "\xc3\xa9",
                                        "\xe2\x82\xac",
                                        "\xf0\x9f\x98\x80",
                                        "\xc0\x80",
                                        "\xed\xa0\x80",
                                        "\xff",
                                        "\x7f",
                                        "\x01",
                                        "\\x",
                                        "\\u12G4",
                                        "spec.template.spec",
                                        "/~0~1",
                                        "0123456789abcdef"};
    gen_puts(g, "\"");
    unsigned k = pick(g, 5);
    for (unsigned i = 0; i < k; i++)
        gen_puts(g, parts[pick(g, sizeof(parts) / sizeof(parts[0]))]);
    gen_puts(g, "\"");
}

static void gen_number(struct gen *g)
{
    static const char *const nums[] = {"0",
                                       "-0",
                                       "1",
                                       "4096",
                                       "-17",
                                       "9223372036854775807",
                                       "-9223372036854775808",
                                       "9223372036854775808",
                                       "-9223372036854775809",
                                       "123456789012345678901234567890",
                                       "1.5",
                                       "-0.0",
                                       "4096.0",
                                       "1e3",
                                       "1E+3",
                                       "2.5e-3",
                                       "1e400",
                                       "-1e400",
                                       "1e-400",
                                       "0.1e1",
                                       "01",
                                       "1.",
                                       ".5",
                                       "-",
                                       "1e",
                                       "1e+",
                                       "+1",
                                       "0x10",
                                       "1.2.3",
                                       "00"};
    gen_puts(g, nums[pick(g, sizeof(nums) / sizeof(nums[0]))]);
}

static void gen_value(struct gen *g, int depth)
{
    unsigned k = depth > 5 ? pick(g, 6) : pick(g, 9);
    gen_ws(g);
    switch (k) {
    case 0:
    case 1:
        gen_string(g);
        break;
    case 2:
    case 3:
        gen_number(g);
        break;
    case 4: {
        static const char *const lit[] = {"true", "false", "null", "tru", "nul", "True"};
        gen_puts(g, lit[pick(g, 6)]);
        break;
    }
    case 5:
        gen_puts(g, pick(g, 2) ? "{}" : "[]");
        break;
    case 6:
    case 7: {
        gen_puts(g, "{");
        unsigned n = pick(g, 5);
        for (unsigned i = 0; i < n; i++) {
            if (i)
                gen_puts(g, ",");
            gen_ws(g);
            gen_string(g);
            gen_ws(g);
            gen_puts(g, ":");
            gen_value(g, depth + 1);
            gen_ws(g);
        }
        gen_puts(g, "}");
        break;
    }
    default: {
        gen_puts(g, "[");
        unsigned n = pick(g, 5);
        for (unsigned i = 0; i < n; i++) {
            if (i)
                gen_puts(g, ",");
            gen_value(g, depth + 1);
            gen_ws(g);
        }
        gen_puts(g, "]");
        break;
    }
    }
}

static void test_own_reader_agrees_with_yajl_on_edge_cases(void **state)
{
    (void)state;
    static const char *const cases[] = {"{}",
                                        "[]",
                                        "0",
                                        "-0",
                                        "\"\"",
                                        "true",
                                        " {\"a\" : [1, 2.5, \"x\", null, false]} ",
                                        "{\"a\":1,\"a\":2}",
                                        "\"\\ud83d\\ude00\"",
                                        "\"\\ud800\"",
                                        "\"\\udc00\"",
                                        "\"\\u0000\"",
                                        "\"\xed\xa0\x80\"",
                                        "\"\xc0\x80\"",
                                        "\"\xf4\x90\x80\x80\"",
                                        "\"\xf8\x88\x80\x80\x80\"",
                                        "1e400",
                                        "-1e400",
                                        "1e-400",
                                        "9223372036854775808",
                                        "-9223372036854775809",
                                        "[1,2",
                                        "{\"a\":",
                                        "\"abc",
                                        "tru",
                                        "[01]",
                                        "[1.]",
                                        "\"\\x41\"",
                                        "\"a\tb\"",
                                        "\f{}",
                                        "{}\v",
                                        "\xef\xbb\xbf{}",
                                        "[1]x",
                                        "[1] [2]",
                                        "{\"k\":{\"k\":{\"k\":{}}}}"};
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++)
        expect_same_as_yajl(cases[k], strlen(cases[k]));
    static const char nul_in_string[] = "{\"a\":\"x\0y\"}";
    expect_same_as_yajl(nul_in_string, sizeof(nul_in_string) - 1);
    /* no text at all (a body of 0 bytes may come as NULL): yajl's answer, nothing read */
    char e1[256], e2[256];
    assert_null(hj_parse(NULL, 0, e1, sizeof(e1)));
    assert_null(hj_parse_yajl(NULL, 0, e2, sizeof(e2)));
    assert_string_equal(e1, e2);
    char *deep = nested(64, '[', ']', "1");
    expect_same_as_yajl(deep, strlen(deep));
    free(deep);
    deep = nested(65, '{', '}', "");
    expect_same_as_yajl(deep, strlen(deep));
    free(deep);
}

/* Generated documents (strings with every escape and UTF-8 form, numbers at int64's edges,
 * whitespace the reader leaves to yajl), each also cut short and with one byte changed. */
static void test_own_reader_agrees_with_yajl_on_generated_documents(void **state)
{
    (void)state;
    struct gen g = {.rng = 0x9e3779b97f4a7c15ULL};
    static const char flip[] = "\"\\{}[],:0-eE.+ \t\nu\x80\xc3";
    for (int i = 0; i < 4000; i++) {
        g.n = 0;
        gen_value(&g, 0);
        gen_ws(&g);
        expect_same_as_yajl(g.buf, g.n);
        expect_same_as_yajl(g.buf, g.n ? pick(&g, (unsigned)g.n) : 0);
        if (g.n) {
            char *m = malloc(g.n);
            assert_non_null(m);
            memcpy(m, g.buf, g.n);
            m[pick(&g, (unsigned)g.n)] = flip[pick(&g, sizeof(flip) - 1)];
            expect_same_as_yajl(m, g.n);
            free(m);
        }
    }
    free(g.buf);
}

/* hj_text_len: a UTF-8 sequence left incomplete at the end (a cut into a fixed buffer) is
 * dropped, nothing else: complete ones, ASCII, and bytes no cut makes stay. */
static void test_text_len_drops_only_a_cut_sequence(void **state)
{
    (void)state;
    static const struct {
        const char *s;
        size_t want;
    } cases[] = {{"", 0},
                 {"abc", 3},
                 {"a\xc3", 1},
                 {"a\xc3\xa9", 3},
                 {"a\xe2\x82", 1},
                 {"a\xe2\x82\xac", 4},
                 {"a\xf0\x9f\x98", 1},
                 {"\xf0\x9f\x98\x80", 4},
                 {"\xf0", 0},
                 {"a\x80", 2},
                 {"a\x80\x80\x80\x80", 5},
                 {"a\xff", 2},
                 {"a\xf8\x80", 3},
                 {"a\xc0", 1},
                 {"a\xe2\x82\xac\x80", 5}};
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++)
        assert_int_equal(hj_text_len(cases[k].s, strlen(cases[k].s)), cases[k].want);
    char cut[] = "ab\xe2\x82";
    hj_text_cut(cut);
    assert_string_equal(cut, "ab");
    hj *v = hj_new_text("x\xc3");
    assert_int_equal(v->slen, 1);
    hj_free(v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip_compact_is_byte_identical),
        cmocka_unit_test(test_roundtrip_whitespace_removed_order_kept),
        cmocka_unit_test(test_roundtrip_parse_dump_parse_equal),
        cmocka_unit_test(test_clone_is_deep_and_equal),
        cmocka_unit_test(test_builders),
        cmocka_unit_test(test_int_and_float_literals_differ),
        cmocka_unit_test(test_float_spellings_compare_by_value),
        cmocka_unit_test(test_int64_limits),
        cmocka_unit_test(test_memory_sizes_stay_integers),
        cmocka_unit_test(test_new_int_prints_like_parsed),
        cmocka_unit_test(test_equal_structure),
        cmocka_unit_test(test_duplicate_keys_last_wins),
        cmocka_unit_test(test_strings_keep_embedded_nul_escape),
        cmocka_unit_test(test_depth_64_accepted),
        cmocka_unit_test(test_depth_65_rejected),
        cmocka_unit_test(test_member_limit),
        cmocka_unit_test(test_node_budget),
        cmocka_unit_test(test_malformed_inputs),
        cmocka_unit_test(test_error_messages_are_specific),
        cmocka_unit_test(test_error_message_truncated_to_buffer),
        cmocka_unit_test(test_ptr_lookup),
        cmocka_unit_test(test_get_helpers),
        cmocka_unit_test(test_ptr_split),
        cmocka_unit_test(test_ptr_append_escapes),
        cmocka_unit_test(test_ptr_append_failure_leaves_buffer_unchanged),
        cmocka_unit_test(test_error_offset_of_truncated_input),
        cmocka_unit_test(test_arena_tree_behaves_like_a_heap_tree),
        cmocka_unit_test(test_arena_frees_heap_children_and_survives_errors),
        cmocka_unit_test(test_arena_spans_many_blocks),
        cmocka_unit_test(test_arena_value_into_a_heap_tree_aborts),
        cmocka_unit_test(test_own_reader_agrees_with_yajl_on_edge_cases),
        cmocka_unit_test(test_own_reader_agrees_with_yajl_on_generated_documents),
        cmocka_unit_test(test_text_len_drops_only_a_cut_sequence),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
