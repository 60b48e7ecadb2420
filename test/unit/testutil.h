/* testutil.h: small helpers shared by the cmocka unit tests (header only, all static inline).
 * Include after <cmocka.h>. Fixture files are found through HV_SOURCE_DIR (set by ctest);
 * when it is unset (a test binary run by hand or under valgrind) the repository root is
 * derived from this header's own path.
 */
#ifndef HV_TESTUTIL_H
#define HV_TESTUTIL_H

#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "jsonpatch.h"

/* The repository root: $HV_SOURCE_DIR, else this file's path minus "/test/unit/testutil.h". */
static inline void tu_source_dir(char *out, size_t cap)
{
    const char *env = getenv("HV_SOURCE_DIR");
    if (env && env[0]) {
        snprintf(out, cap, "%s", env);
        return;
    }
    const char *self = __FILE__;
    const char *tail = strstr(self, "/test/unit/testutil.h");
    assert_non_null(tail);
    snprintf(out, cap, "%.*s", (int)(tail - self), self);
}

/* Read a whole file; caller frees. Fails the test when it cannot. */
static inline char *tu_read_file(const char *path, size_t *len_out)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("cannot open %s", path);
    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    long n = ftell(f);
    assert_true(n >= 0);
    rewind(f);
    char *buf = malloc((size_t)n + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    buf[n] = '\0';
    fclose(f);
    if (len_out)
        *len_out = (size_t)n;
    return buf;
}

/* Parse text that must be valid JSON. */
static inline hj *tu_json(const char *text)
{
    char err[256] = "";
    hj *v = hj_parse(text, strlen(text), err, sizeof(err));
    if (!v)
        fail_msg("test JSON does not parse: %s: %s", err, text);
    return v;
}

/* Load test/fixtures/<name> (name with ".json"). */
static inline hj *tu_fixture(const char *name)
{
    char root[1024], path[1400], err[256] = "";
    size_t len;
    tu_source_dir(root, sizeof(root));
    snprintf(path, sizeof(path), "%s/test/fixtures/%s", root, name);
    char *text = tu_read_file(path, &len);
    hj *v = hj_parse(text, len, err, sizeof(err));
    free(text);
    if (!v)
        fail_msg("fixture %s does not parse: %s", name, err);
    return v;
}

static inline int tu_cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted names of the .json files in test/fixtures; caller frees with tu_free_names. */
static inline char **tu_fixture_names(size_t *n_out)
{
    char root[1024], path[1200];
    tu_source_dir(root, sizeof(root));
    snprintf(path, sizeof(path), "%s/test/fixtures", root);
    DIR *d = opendir(path);
    if (!d)
        fail_msg("cannot open %s", path);
    char **names = NULL;
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t l = strlen(e->d_name);
        if (l <= 5 || strcmp(e->d_name + l - 5, ".json"))
            continue;
        names = realloc(names, (n + 1) * sizeof(*names));
        assert_non_null(names);
        names[n] = strdup(e->d_name);
        assert_non_null(names[n]);
        n++;
    }
    closedir(d);
    qsort(names, n, sizeof(*names), tu_cmp_names);
    *n_out = n;
    return names;
}

static inline void tu_free_names(char **names, size_t n)
{
    for (size_t k = 0; k < n; k++)
        free(names[k]);
    free(names);
}

/* Assert that v prints as exactly the expected compact text. */
static inline void tu_assert_dump(const hj *v, const char *expected)
{
    size_t len = 0;
    char *text = hj_dump(v, &len);
    assert_non_null(text);
    assert_string_equal(text, expected);
    assert_int_equal(len, strlen(expected));
    free(text);
}

/* Set (add or replace) the value at an RFC 6901 pointer whose parent exists, from JSON text. */
static inline void tu_set(hj *doc, const char *pointer, const char *json_value)
{
    char err[256] = "";
    hj *ops = hj_new_array();
    hj *val = tu_json(json_value);
    hv_jsonpatch_add_op(ops, "add", pointer, val);
    hj_free(val);
    if (hv_jsonpatch_apply(&doc, ops, err, sizeof(err)) != 0)
        fail_msg("cannot set %s: %s", pointer, err);
    hj_free(ops);
}

/* Remove the member at a pointer (it must exist). */
static inline void tu_del(hj *doc, const char *pointer)
{
    char err[256] = "";
    hj *ops = hj_new_array();
    hv_jsonpatch_add_op(ops, "remove", pointer, NULL);
    if (hv_jsonpatch_apply(&doc, ops, err, sizeof(err)) != 0)
        fail_msg("cannot remove %s: %s", pointer, err);
    hj_free(ops);
}

#endif
