/* log.c: one JSON line per event on stderr, written with a single stdio call so lines from
 * concurrent threads never interleave. */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static enum hv_log_level min_level = HV_LOG_INFO;
static const char *const names[] = {"debug", "info", "warn", "error"};

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

int hv_log_enabled(enum hv_log_level l)
{
    return l >= min_level;
}

static size_t put_escaped(char *out, size_t at, size_t cap, const char *s)
{
    for (; *s && at + 8 < cap; s++) {
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

void hv_log(enum hv_log_level l, const char *event, ...)
{
    if (l < min_level)
        return;
    char line[4096];
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    size_t at =
        (size_t)snprintf(line, sizeof(line),
                         "{\"ts\":\"%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ\",\"level\":\"%s\","
                         "\"event\":\"",
                         tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
                         tm.tm_sec, ts.tv_nsec / 1000000, names[l]);
    at = put_escaped(line, at, sizeof(line), event);
    line[at++] = '"';
    va_list ap;
    va_start(ap, event);
    const char *k;
    while ((k = va_arg(ap, const char *)) != NULL) {
        const char *v = va_arg(ap, const char *);
        int raw = k[0] == '#';
        if (at + 16 >= sizeof(line))
            break;
        line[at++] = ',';
        line[at++] = '"';
        at = put_escaped(line, at, sizeof(line), raw ? k + 1 : k);
        line[at++] = '"';
        line[at++] = ':';
        if (!raw)
            line[at++] = '"';
        at = put_escaped(line, at, sizeof(line), v ? v : "");
        if (!raw && at + 2 < sizeof(line))
            line[at++] = '"';
    }
    va_end(ap);
    if (at + 3 > sizeof(line))
        at = sizeof(line) - 3;
    line[at++] = '}';
    line[at++] = '\n';
    line[at] = '\0';
    fputs(line, stderr);
}
