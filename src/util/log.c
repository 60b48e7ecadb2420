/* log.c: one JSON line per event on stderr, written with a single stdio call so lines from
 * concurrent threads never interleave. Two formats (log.h): hvupdater's own and Cluster
 * API's JSON logs; the capi format's sentences are in the table below. */
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

/* The capi format's msg for each event id, as CAPI writes messages (a capital first letter,
 * no period), and the key that holds the error text on the event's warn and error lines
 * (written as "err"). An id missing here is written as its own msg: unit.test_log fails on
 * an hv_log call under src/ or backends/ whose id is missing. */
static const struct {
    const char *event, *msg, *err;
} events[] = {
    {"accept-resumed", "Accepting connections again", NULL},
    {"accept-starved", "Out of descriptors, not accepting connections for now", "reason"},
    {"backend-error", "Hypervisor call failed", "detail"},
    {"compose", "Composing the hook answer failed", "detail"},
    {"connection limit lowered to fit the open file limit",
     "Connection limit lowered to fit the open file limit", NULL},
    {"downstream-call", "Downstream extension called", NULL},
    {"downstream-discovery", "Downstream extension discovery done", "message"},
    {"downstream-error", "Downstream extension call failed", "detail"},
    {"draining", "Draining before stopping", NULL},
    {"dry-run", "Provider asked whether it accepts a change (dry run)", "detail"},
    {"engine", "Starting the engine failed", "detail"},
    {"engine-assertion", "An engine invariant was found broken", "what"},
    {"event-dropped", "Kubernetes Event dropped", "detail"},
    {"event-error", "Posting a Kubernetes Event failed", "detail"},
    {"event-posted", "Kubernetes Event posted", NULL},
    {"failpoint", "Failpoint reached, stopping with SIGKILL", NULL},
    {"guest-not-reporting-yet", "Waiting for the guest to report", NULL},
    {"hook", "Hook call answered", "message"},
    {"http", "HTTP server message", NULL},
    {"http-error", "Request refused", "message"},
    {"illegal-phase-move", "Operation record moved against the phase table", NULL},
    {"insecure-any-caller", "Serving beyond loopback with no check of who calls", NULL},
    {"insecure-tls", "TLS verification of a vCenter is off", NULL},
    {"listening", "Serving hooks", NULL},
    {"live-timeout", "Live change timed out, power cycling", NULL},
    {"machine-check-read-error", "Reading an object for the machine check failed", "detail"},
    {"mhc-adopted", "Remediation hold found again after a restart", NULL},
    {"mhc-hold", "Machine held from MachineHealthCheck remediation during its power cycle", NULL},
    {"mhc-hold-full", "Too many Machines tracked for the remediation hold", "detail"},
    {"mhc-list-error", "Listing Machines for remediation holds failed", "detail"},
    {"mhc-patch-error", "Patching a Machine's remediation hold failed", "detail"},
    {"mhc-read-error", "Reading a held Machine's VM or Machine failed", "detail"},
    {"mhc-release", "Machine's remediation hold removed", NULL},
    {"operation-done", "Update operation done", NULL},
    {"operation-failed", "Update operation failed", "message"},
    {"operation-start", "Update operation started", NULL},
    {"probe-error", "Reading a VM failed", "detail"},
    {"resume", "Resuming an update operation", NULL},
    {"resume-refused", "Update record found on a VM not carried on", "message"},
    {"resume-unconfirmed", "Update record found on a VM waits for the API server", "message"},
    {"resume-unreported", "Paused VM found running again with no report of it", NULL},
    {"rolled-back", "VM powered on again after a failed update", NULL},
    {"scan-error", "Scanning a hypervisor for update records failed", "detail"},
    {"self-signed", "Serving certificate made here", NULL},
    {"startup-failed", "Starting failed", NULL},
    {"step", "Hypervisor step taken", NULL},
    {"stopping", "Stopping", NULL},
    {"usage-error", "Bad command line", NULL},
};

int hv_log_level_from_name(const char *name)
{
    for (int k = 0; k < 4; k++) {
        if (!strcmp(name, names[k]))
            return k;
    }
    return -1;
}

int hv_log_format_from_name(const char *name)
{
    for (int k = 0; k < 2; k++) {
        if (!strcmp(name, format_names[k]))
            return k;
    }
    return -1;
}

void hv_log_set_level(enum hv_log_level l)
{
    min_level = l;
}

int hv_log_set_level_name(const char *name)
{
    int k = hv_log_level_from_name(name);
    if (k < 0)
        return -1;
    min_level = (enum hv_log_level)k;
    return 0;
}

void hv_log_set_format(enum hv_log_format f)
{
    format = f;
}

int hv_log_set_format_name(const char *name)
{
    int k = hv_log_format_from_name(name);
    if (k < 0)
        return -1;
    format = (enum hv_log_format)k;
    return 0;
}

int hv_log_enabled(enum hv_log_level l)
{
    return l >= min_level;
}

static int event_index(const char *event)
{
    for (size_t k = 0; k < sizeof(events) / sizeof(events[0]); k++) {
        if (!strcmp(event, events[k].event))
            return (int)k;
    }
    return -1;
}

const char *hv_log_event_message(const char *event)
{
    int k = event_index(event);
    return k < 0 ? NULL : events[k].msg;
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

/* The path as zap's short caller writes it: the last directory and the file. */
static const char *short_path(const char *file)
{
    const char *last = strrchr(file, '/');
    if (!last)
        return file;
    const char *dir = last;
    while (dir > file && dir[-1] != '/')
        dir--;
    return dir;
}

/* The capi format's head: ts (milliseconds since the epoch, as component-base's
 * epochMillisTimeEncoder), caller and msg, as zap's JSON encoder begins every line. */
static size_t capi_head(char *line, size_t cap, const struct timespec *ts, const char *file,
                        int lineno, const char *event)
{
    int k = event_index(event);
    size_t at = (size_t)snprintf(line, cap, "{\"ts\":%lld.%03ld,\"caller\":\"",
                                 (long long)ts->tv_sec * 1000 + ts->tv_nsec / 1000000,
                                 ts->tv_nsec / 1000 % 1000);
    at = put_escaped(line, at, cap, short_path(file));
    at += (size_t)snprintf(line + at, cap - at, ":%d\",\"msg\":", lineno);
    const char *msg = k < 0 ? event : events[k].msg;
    return put_string(line, at, cap, msg, strlen(msg));
}

/* The key of this line that holds its error text in the capi format, or NULL. */
static const char *capi_err_key(enum hv_log_level l, const char *event, const char *k)
{
    if (!strcmp(k, "error"))
        return k;
    int e = event_index(event);
    if (l >= HV_LOG_WARN && e >= 0 && events[e].err && !strcmp(k, events[e].err))
        return k;
    return NULL;
}

void(hv_log)(const char *file, int lineno, enum hv_log_level l, const char *event, ...)
{
    if (l < min_level)
        return;
    char line[4096];
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    size_t at, cap = sizeof(line);
    bool capi = format == HV_LOG_FORMAT_CAPI;
    const char *err = NULL; /* capi: the error text, written last as "err" */
    va_list ap;
    char ns[256] = ""; /* the namespace of the object before, across one line's objects */
    const char *k;
    if (capi) {
        va_start(ap, event);
        while ((k = va_arg(ap, const char *)) != NULL) {
            const char *v = va_arg(ap, const char *);
            if (!err && v && *v && capi_err_key(l, event, k))
                err = v;
        }
        va_end(ap);
        if (err)
            cap -= 1024; /* the other keys leave room for it */
        at = capi_head(line, sizeof(line), &ts, file, lineno, event);
        /* the objects next: CAPI's lines carry the objects a controller reconciles in the
         * logger's context (WithValues), which zap writes after msg and before the call's
         * own keys, v first among those (zapr's Info; none on an Error line) */
        va_start(ap, event);
        while ((k = va_arg(ap, const char *)) != NULL) {
            const char *v = va_arg(ap, const char *);
            if (k[0] == '@' && v && *v && at + 16 < cap) {
                at = put_key(line, at, cap, k + 1, false);
                at = put_object(line, at, cap, v, ns, sizeof(ns));
            }
        }
        va_end(ap);
        if (l != HV_LOG_ERROR)
            at += (size_t)snprintf(line + at, cap - at, ",\"v\":%d", l == HV_LOG_DEBUG ? 4 : 0);
        at = put_key(line, at, cap, "event", false);
        at = put_string(line, at, cap, event, strlen(event));
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
    va_start(ap, event);
    while ((k = va_arg(ap, const char *)) != NULL) {
        const char *v = va_arg(ap, const char *);
        if (at + 16 >= cap)
            break;
        if (err && v == err)
            continue;
        if (k[0] == '@') {
            if (capi)
                continue; /* written above */
            v = v ? v : "";
            at = put_key(line, at, cap, k + 1, true);
            at = put_string(line, at, cap, v, strlen(v));
            continue;
        }
        int raw = k[0] == '#';
        at = put_key(line, at, cap, raw ? k + 1 : k, false);
        if (raw)
            at = put_escaped(line, at, cap, v ? v : "");
        else
            at = put_string(line, at, cap, v ? v : "", v ? strlen(v) : 0);
    }
    va_end(ap);
    if (err && at + 16 < sizeof(line)) {
        at = put_key(line, at, sizeof(line), "err", false);
        at = put_string(line, at, sizeof(line), err, strlen(err));
    }
    if (at + 3 > sizeof(line))
        at = sizeof(line) - 3;
    line[at++] = '}';
    line[at++] = '\n';
    line[at] = '\0';
    fputs(line, stderr);
}
