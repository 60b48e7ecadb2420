/* log.c: one JSON line per event on stderr, written with a single stdio call so lines from
 * concurrent threads never interleave. Two formats (log.h): hvupdater's own and Cluster
 * API's JSON logs. */
#include "log.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static enum hv_log_level min_level = HV_LOG_INFO;
static enum hv_log_format format = HV_LOG_FORMAT_HVUPDATER;
static const char *const names[] = {"debug", "info", "warn", "error"};
static const char *const format_names[] = {"hvupdater", "capi"};

void hv_log_set_level(enum hv_log_level l)
{
    min_level = l;
}

int hv_log_set_level_name(const char *name)
{
    for (int k = 0; k < 4; k++) {
        if (!strcmp(name, names[k])) {
            min_level = (enum hv_log_level)k;
            return 0;
        }
    }
    return -1;
}

void hv_log_set_format(enum hv_log_format f)
{
    format = f;
}

int hv_log_set_format_name(const char *name)
{
    for (int k = 0; k < 2; k++) {
        if (!strcmp(name, format_names[k])) {
            format = (enum hv_log_format)k;
            return 0;
        }
    }
    return -1;
}

int hv_log_enabled(enum hv_log_level l)
{
    return l >= min_level;
}

static size_t put_escaped_n(char *out, size_t at, size_t cap, const char *s, size_t n)
{
    for (const char *end = s + n; s < end && *s && at + 8 < cap; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\') {
            out[at++] = '\\';
            out[at++] = (char)ch;
        } else if (ch < 0x20) {
            at += (size_t)snprintf(out + at, cap - at, "\\u%04x", ch);
        } else {
            out[at++] = (char)ch;
        }
    }
    return at;
}

static size_t put_escaped(char *out, size_t at, size_t cap, const char *s)
{
    return put_escaped_n(out, at, cap, s, strlen(s));
}

/* Raw text (no escaping), as far as it fits. */
static size_t put_raw(char *out, size_t at, size_t cap, const char *s)
{
    for (; *s && at + 8 < cap; s++)
        out[at++] = *s;
    return at;
}

/* ,"key": with the key escaped; lower_first turns "Machine" into "machine". */
static size_t put_key(char *out, size_t at, size_t cap, const char *k, bool lower_first)
{
    out[at++] = ',';
    out[at++] = '"';
    if (lower_first && *k >= 'A' && *k <= 'Z') {
        out[at++] = (char)(*k - 'A' + 'a');
        k++;
    }
    at = put_escaped(out, at, cap, k);
    out[at++] = '"';
    out[at++] = ':';
    return at;
}

/* A quoted, escaped string value. */
static size_t put_string(char *out, size_t at, size_t cap, const char *v, size_t n)
{
    out[at++] = '"';
    at = put_escaped_n(out, at, cap, v, n);
    if (at + 2 < cap)
        out[at++] = '"';
    return at;
}

/* {"name":..,"namespace":..} from "namespace/name", or from "name" with the namespace of
 * the object before it (ns holds it across the keys of one line). */
static size_t put_object(char *out, size_t at, size_t cap, const char *v, char *ns, size_t nscap)
{
    const char *slash = strchr(v, '/');
    const char *name = v;
    if (slash) {
        snprintf(ns, nscap, "%.*s", (int)(slash - v), v);
        name = slash + 1;
    }
    at = put_raw(out, at, cap, "{\"name\":");
    at = put_string(out, at, cap, name, strlen(name));
    if (ns[0]) {
        at = put_raw(out, at, cap, ",\"namespace\":");
        at = put_string(out, at, cap, ns, strlen(ns));
    }
    if (at + 2 < cap)
        out[at++] = '}';
    return at;
}

void hv_log(enum hv_log_level l, const char *event, ...)
{
    if (l < min_level)
        return;
    char line[4096];
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    size_t at;
    bool capi = format == HV_LOG_FORMAT_CAPI;
    if (capi) {
        /* component-base's JSON: ts in seconds since the epoch, msg, v (debug is klog's V(4)) */
        at = (size_t)snprintf(line, sizeof(line), "{\"ts\":%lld.%03ld,\"level\":\"%s\",\"msg\":\"",
                              (long long)ts.tv_sec, ts.tv_nsec / 1000000, names[l]);
        at = put_escaped(line, at, sizeof(line), event);
        at += (size_t)snprintf(line + at, sizeof(line) - at, "\",\"v\":%d",
                               l == HV_LOG_DEBUG ? 4 : 0);
    } else {
        struct tm tm;
        gmtime_r(&ts.tv_sec, &tm);
        at = (size_t)snprintf(line, sizeof(line),
                              "{\"ts\":\"%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ\",\"level\":\"%s\","
                              "\"event\":\"",
                              tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
                              tm.tm_sec, ts.tv_nsec / 1000000, names[l]);
        at = put_escaped(line, at, sizeof(line), event);
        line[at++] = '"';
    }
    char ns[256] = "";
    va_list ap;
    va_start(ap, event);
    const char *k;
    while ((k = va_arg(ap, const char *)) != NULL) {
        const char *v = va_arg(ap, const char *);
        if (at + 16 >= sizeof(line))
            break;
        if (k[0] == '@') {
            if (capi && (!v || !*v))
                continue;
            v = v ? v : "";
            at = put_key(line, at, sizeof(line), k + 1, !capi);
            at = capi ? put_object(line, at, sizeof(line), v, ns, sizeof(ns))
                      : put_string(line, at, sizeof(line), v, strlen(v));
            continue;
        }
        int raw = k[0] == '#';
        at = put_key(line, at, sizeof(line), raw ? k + 1 : k, false);
        if (raw)
            at = put_escaped(line, at, sizeof(line), v ? v : "");
        else
            at = put_string(line, at, sizeof(line), v ? v : "", v ? strlen(v) : 0);
    }
    va_end(ap);
    if (at + 3 > sizeof(line))
        at = sizeof(line) - 3;
    line[at++] = '}';
    line[at++] = '\n';
    line[at] = '\0';
    fputs(line, stderr);
}
