/* test_log.c: cmocka tests for src/util/log.c: the capi format's shape as component-base's
 * JSON logs write it (every key and its type, ts in milliseconds within the clock's range,
 * caller, v, err, object references, key order), the hvupdater format byte for byte, bounds
 * and escaping, a sentence for every event id the sources log, and the config's log section.
 * Each test captures what hv_log writes on stderr (fd 2 on a temporary file meanwhile). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <regex.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "json.h"
#include "log.h"
#include "testutil.h"

static FILE *cap_file;
static int cap_saved = -1;

/* From here to cap_end, stderr goes to a temporary file. */
static void cap_begin(void)
{
    fflush(stderr);
    cap_file = tmpfile();
    assert_non_null(cap_file);
    cap_saved = dup(2);
    assert_true(cap_saved >= 0);
    assert_true(dup2(fileno(cap_file), 2) >= 0);
}

/* What was written on stderr since cap_begin (caller frees); stderr is restored. */
static char *cap_end(void)
{
    fflush(stderr);
    dup2(cap_saved, 2);
    close(cap_saved);
    long n = ftell(cap_file);
    assert_true(n >= 0);
    rewind(cap_file);
    char *buf = malloc((size_t)n + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)n, cap_file), (size_t)n);
    buf[n] = '\0';
    fclose(cap_file);
    return buf;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* One line, newline-terminated, parsed; the caller frees it. */
static hj *one_line(const char *out)
{
    size_t len = strlen(out);
    assert_true(len > 2);
    assert_int_equal(out[len - 1], '\n');
    assert_null(memchr(out, '\n', len - 1));
    char err[256] = "";
    hj *v = hj_parse(out, len, err, sizeof(err));
    if (!v)
        fail_msg("log line is not JSON: %s: %s", err, out);
    assert_int_equal(v->type, HJ_OBJECT);
    return v;
}

static void assert_str(const hj *o, const char *key, const char *want)
{
    const hj *v = hj_get(o, key);
    if (!v || v->type != HJ_STRING)
        fail_msg("key %s is not a string", key);
    assert_string_equal(v->s, want);
}

/* o[key] is {"name":name,"namespace":ns} with those two keys in that order (klog's
 * ObjectRef: namespace left out when empty). */
static void assert_ref(const hj *o, const char *key, const char *name, const char *ns)
{
    const hj *r = hj_get(o, key);
    if (!r || r->type != HJ_OBJECT)
        fail_msg("key %s is not an object", key);
    assert_int_equal(r->n, ns ? 2 : 1);
    assert_string_equal(r->keys[0], "name");
    assert_str(r, "name", name);
    if (ns) {
        assert_string_equal(r->keys[1], "namespace");
        assert_str(r, "namespace", ns);
    }
}

static void keys_are(const hj *o, const char *const *want)
{
    size_t n = 0;
    for (; want[n]; n++) {
        if (n >= o->n)
            fail_msg("line has %zu keys, %s expected next", o->n, want[n]);
        if (strcmp(o->keys[n], want[n]))
            fail_msg("key %zu is %s, %s expected", n, o->keys[n], want[n]);
    }
    assert_int_equal(o->n, n);
}

static int reset(void **state)
{
    (void)state;
    hv_log_set_format(HV_LOG_FORMAT_HVUPDATER);
    hv_log_set_level(HV_LOG_INFO);
    return 0;
}

static void test_capi_info_line_keys_and_types(void **state)
{
    (void)state;
    hv_log_set_format(HV_LOG_FORMAT_CAPI);
    char caller[64];
    double before = now_ms();
    cap_begin();
    /* clang-format off */
    snprintf(caller, sizeof(caller), "unit/test_log.c:%d", __LINE__ + 1);
    hv_log(HV_LOG_INFO, "hook", "hook", "UpdateMachine", "status", "Success", "#http", "200", "#ms", "1.250", "message", "updating", "@Machine", "ns1/m-1", "@Cluster", "c1", "vm", "test:///default name d", (char *)NULL);
    /* clang-format on */
    char *out = cap_end();
    double after = now_ms();
    hj *l = one_line(out);
    /* zap's order: ts, caller, msg, the logger's context (CAPI's objects), then the call's
     * keys with v first (zapr) */
    static const char *const order[] = {"ts", "caller",  "msg",  "Machine", "Cluster",
                                        "v",  "event",   "hook", "status",  "http",
                                        "ms", "message", "vm",   NULL};
    keys_are(l, order);
    /* ts: a number of milliseconds since the epoch (component-base's epochMillisTimeEncoder),
     * taken between the two clock reads around the call */
    const hj *ts = hj_get(l, "ts");
    assert_true(ts->type == HJ_FLOAT || ts->type == HJ_INT);
    double t = ts->type == HJ_FLOAT ? ts->f : (double)ts->i;
    if (t < before - 0.001 || t > after + 0.001)
        fail_msg("ts %.3f outside [%.3f, %.3f]", t, before, after);
    assert_true(t > 1e12); /* milliseconds: seconds would date the line to 1970 */
    assert_str(l, "caller", caller);
    assert_str(l, "msg", "Hook call answered");
    assert_int_equal(hj_get(l, "v")->type, HJ_INT);
    assert_int_equal(hj_get(l, "v")->i, 0);
    assert_str(l, "event", "hook");
    assert_int_equal(hj_get(l, "http")->type, HJ_INT);
    assert_int_equal(hj_get(l, "ms")->type, HJ_FLOAT);
    assert_str(l, "message", "updating"); /* an info line's message is no error */
    assert_ref(l, "Machine", "m-1", "ns1");
    assert_ref(l, "Cluster", "c1", "ns1"); /* in its Machine's namespace */
    assert_null(hj_get(l, "level"));
    assert_null(hj_get(l, "err"));
    hj_free(l);
    free(out);
}

static void test_capi_debug_is_v4_and_empty_refs_are_left_out(void **state)
{
    (void)state;
    hv_log_set_format(HV_LOG_FORMAT_CAPI);
    hv_log_set_level(HV_LOG_DEBUG);
    cap_begin();
    hv_log(HV_LOG_DEBUG, "http", "detail", "x", "@MachineSet", "", "@Cluster", "c/d", (char *)NULL);
    char *out = cap_end();
    hj *l = one_line(out);
    assert_int_equal(hj_get(l, "v")->i, 4);
    assert_str(l, "msg", "HTTP server message");
    assert_null(hj_get(l, "MachineSet"));
    assert_ref(l, "Cluster", "d", "c");
    hj_free(l);
    free(out);
}

static void test_capi_error_line_has_err_last_and_no_v(void **state)
{
    (void)state;
    hv_log_set_format(HV_LOG_FORMAT_CAPI);
    cap_begin();
    hv_log(HV_LOG_ERROR, "startup-failed", "error", "config x: cannot open", "help", "h",
           (char *)NULL);
    char *out = cap_end();
    hj *l = one_line(out);
    /* zapr's Error: no "v", the error under "err" after the other keys */
    static const char *const order[] = {"ts", "caller", "msg", "event", "help", "err", NULL};
    keys_are(l, order);
    assert_str(l, "msg", "Starting failed");
    assert_str(l, "err", "config x: cannot open");
    assert_null(hj_get(l, "error"));
    hj_free(l);
    free(out);
}

static void test_capi_warn_error_text_is_err(void **state)
{
    (void)state;
    hv_log_set_format(HV_LOG_FORMAT_CAPI);
    cap_begin();
    hv_log(HV_LOG_WARN, "backend-error", "backend", "libvirt", "vm", "u name d", "detail",
           "Domain not found", "#code", "5", (char *)NULL);
    hv_log(HV_LOG_WARN, "hook", "hook", "UpdateMachine", "status", "Error", "#http", "400",
           "message", "request body must be a JSON object", (char *)NULL);
    hv_log(HV_LOG_WARN, "insecure-tls", "server", "vc1", "detail", "TLS verification is OFF",
           (char *)NULL);
    char *out = cap_end();
    char *nl = strchr(out, '\n');
    char *nl2 = strchr(nl + 1, '\n');
    char save = nl[1], save2 = nl2[1];
    nl[1] = '\0';
    hj *a = one_line(out);
    nl[1] = save;
    nl2[1] = '\0';
    hj *b = one_line(nl + 1);
    nl2[1] = save2;
    hj *c = one_line(nl2 + 1);
    /* a warning is klog's Info (v 0) carrying the error */
    static const char *const order[] = {"ts",      "caller", "msg",  "v",   "event",
                                        "backend", "vm",     "code", "err", NULL};
    keys_are(a, order);
    assert_int_equal(hj_get(a, "v")->i, 0);
    assert_str(a, "err", "Domain not found");
    assert_null(hj_get(a, "detail"));
    assert_str(b, "err", "request body must be a JSON object");
    assert_null(hj_get(b, "message"));
    /* insecure-tls's detail is a warning, no error */
    assert_str(c, "detail", "TLS verification is OFF");
    assert_null(hj_get(c, "err"));
    hj_free(a);
    hj_free(b);
    hj_free(c);
    free(out);
}

static void test_capi_unknown_event_is_its_own_msg(void **state)
{
    (void)state;
    hv_log_set_format(HV_LOG_FORMAT_CAPI);
    assert_null(hv_log_event_message("no-such-event"));
    cap_begin();
    hv_log(HV_LOG_INFO, "no-such-event", (char *)NULL);
    char *out = cap_end();
    hj *l = one_line(out);
    assert_str(l, "msg", "no-such-event");
    assert_str(l, "event", "no-such-event");
    hj_free(l);
    free(out);
}

/* The default format is what it was before the capi format changed, byte for byte. */
static void test_hvupdater_format_unchanged(void **state)
{
    (void)state;
    cap_begin();
    hv_log(HV_LOG_WARN, "hook", "hook", "UpdateMachine", "#http", "200", "@Machine", "ns1/m1",
           "@Cluster", "c1", "@MachineSet", "", "error", "e", (char *)NULL);
    char *out = cap_end();
    regex_t re;
    assert_int_equal(regcomp(&re,
                             "^\\{\"ts\":\"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}"
                             "\\.[0-9]{3}Z\",",
                             REG_EXTENDED),
                     0);
    regmatch_t m;
    assert_int_equal(regexec(&re, out, 1, &m, 0), 0);
    regfree(&re);
    assert_string_equal(out + m.rm_eo,
                        "\"level\":\"warn\",\"event\":\"hook\",\"hook\":\"UpdateMachine\","
                        "\"http\":200,\"machine\":\"ns1/m1\",\"cluster\":\"c1\","
                        "\"machineSet\":\"\",\"error\":\"e\"}\n");
    free(out);
}

static void test_escaping_and_bound(void **state)
{
    (void)state;
    static char big[9000];
    memset(big, 'x', sizeof(big) - 1);
    for (int f = 0; f < 2; f++) {
        hv_log_set_format((enum hv_log_format)f);
        cap_begin();
        hv_log(HV_LOG_INFO, "step", "a", "q\"b\\s\n\t\x01", (char *)NULL);
        hv_log(HV_LOG_INFO, "step", "big", big, "big2", big, (char *)NULL);
        /* the error keeps its room however long the other keys are */
        hv_log(HV_LOG_ERROR, "engine", "big", big, "detail", "the error", (char *)NULL);
        char *out = cap_end();
        char *lines[3];
        char *p = out;
        for (int k = 0; k < 3; k++) {
            char *nl = strchr(p, '\n');
            assert_non_null(nl);
            size_t n = (size_t)(nl - p) + 1;
            assert_true(n <= 4096);
            lines[k] = strndup(p, n);
            p = nl + 1;
        }
        assert_int_equal(*p, '\0');
        hj *a = one_line(lines[0]);
        assert_str(a, "a", "q\"b\\s\n\t\x01");
        hj *c = one_line(lines[2]);
        if (f == HV_LOG_FORMAT_CAPI)
            assert_str(c, "err", "the error");
        hj_free(one_line(lines[1]));
        hj_free(a);
        hj_free(c);
        for (int k = 0; k < 3; k++)
            free(lines[k]);
        free(out);
    }
}

static void test_level_filter_and_names(void **state)
{
    (void)state;
    assert_int_equal(hv_log_level_from_name("warn"), HV_LOG_WARN);
    assert_int_equal(hv_log_level_from_name("warning"), -1);
    assert_int_equal(hv_log_format_from_name("capi"), HV_LOG_FORMAT_CAPI);
    assert_int_equal(hv_log_format_from_name("json"), -1);
    assert_int_equal(hv_log_set_format_name("klog"), -1);
    assert_int_equal(hv_log_set_level_name("warn"), 0);
    cap_begin();
    hv_log(HV_LOG_INFO, "step", (char *)NULL);
    char *out = cap_end();
    assert_string_equal(out, "");
    free(out);
}

/* Every event id an hv_log call under src/ or backends/ names has its capi sentence. */
static int scan_tree(const char *dir, int *found)
{
    DIR *d = opendir(dir);
    if (!d)
        fail_msg("cannot open %s", dir);
    int missing = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char path[2048];
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        size_t n = strlen(e->d_name);
        if (e->d_type == DT_DIR) {
            missing += scan_tree(path, found);
            continue;
        }
        if (n < 3 || strcmp(e->d_name + n - 2, ".c") || !strcmp(e->d_name, "log.c"))
            continue;
        char *text = tu_read_file(path, NULL);
        for (const char *p = text; (p = strstr(p, "hv_log(")) != NULL; p++) {
            if (p > text && (p[-1] == '_' || p[-1] == '(' || (p[-1] >= 'a' && p[-1] <= 'z')))
                continue;
            const char *comma = strchr(p, ',');
            if (!comma)
                break;
            const char *q = comma + 1;
            while (*q == ' ' || *q == '\n')
                q++;
            if (*q != '"')
                fail_msg("%s: an hv_log call whose event is not a literal", path);
            const char *end = strchr(q + 1, '"');
            char id[128];
            snprintf(id, sizeof(id), "%.*s", (int)(end - q - 1), q + 1);
            (*found)++;
            if (!hv_log_event_message(id)) {
                print_error("%s: event \"%s\" has no sentence in log.c's table\n", path, id);
                missing++;
            }
        }
        free(text);
    }
    closedir(d);
    return missing;
}

static void test_every_event_has_a_sentence(void **state)
{
    (void)state;
    char root[1024], dir[1100];
    tu_source_dir(root, sizeof(root));
    int found = 0, missing = 0;
    snprintf(dir, sizeof(dir), "%s/src", root);
    missing += scan_tree(dir, &found);
    snprintf(dir, sizeof(dir), "%s/backends", root);
    missing += scan_tree(dir, &found);
    assert_true(found >= 30); /* the scan does find the calls */
    assert_int_equal(missing, 0);
}

static void test_config_log_section(void **state)
{
    (void)state;
    struct hv_config c;
    char err[256];
    hv_config_default(&c);
    assert_int_equal(c.log.format, -1);
    assert_int_equal(c.log.level, -1);
    const char *ok = "{\"log\":{\"format\":\"capi\",\"level\":\"debug\"}}";
    assert_int_equal(hv_config_parse(&c, ok, strlen(ok), err, sizeof(err)), 0);
    assert_int_equal(c.log.format, HV_LOG_FORMAT_CAPI);
    assert_int_equal(c.log.level, HV_LOG_DEBUG);
    hv_config_free(&c);
    static const struct {
        const char *doc, *err;
    } bad[] = {
        {"{\"log\":{\"format\":\"json\"}}", "log.format must be \"hvupdater\" or \"capi\""},
        {"{\"log\":{\"level\":2}}", "log.level must be \"debug\", \"info\", \"warn\" or \"error\""},
        {"{\"log\":{\"verbosity\":2}}", "log: unknown key \"verbosity\""},
        {"{\"log\":\"capi\"}", "log must be an object"},
    };
    for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
        hv_config_default(&c);
        assert_int_equal(hv_config_parse(&c, bad[k].doc, strlen(bad[k].doc), err, sizeof(err)), -1);
        assert_string_equal(err, bad[k].err);
        hv_config_free(&c);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_capi_info_line_keys_and_types, reset),
        cmocka_unit_test_setup(test_capi_debug_is_v4_and_empty_refs_are_left_out, reset),
        cmocka_unit_test_setup(test_capi_error_line_has_err_last_and_no_v, reset),
        cmocka_unit_test_setup(test_capi_warn_error_text_is_err, reset),
        cmocka_unit_test_setup(test_capi_unknown_event_is_its_own_msg, reset),
        cmocka_unit_test_setup(test_hvupdater_format_unchanged, reset),
        cmocka_unit_test_setup(test_escaping_and_bound, reset),
        cmocka_unit_test_setup(test_level_filter_and_names, reset),
        cmocka_unit_test_setup(test_every_event_has_a_sentence, reset),
        cmocka_unit_test_setup(test_config_log_section, reset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
