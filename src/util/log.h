/* log.h: structured logs, one JSON object per line on stderr. Callers pass key/value pairs;
 * values are escaped here. Never log credentials: callers pass only names and codes. */
#ifndef HV_LOG_H
#define HV_LOG_H

enum hv_log_level { HV_LOG_DEBUG = 0, HV_LOG_INFO, HV_LOG_WARN, HV_LOG_ERROR };

/* HV_LOG_FORMAT_HVUPDATER: {"ts":"<RFC 3339>","level":..,"event":..,...}.
 * HV_LOG_FORMAT_CAPI: the shape of Cluster API's JSON logs (component-base's
 * --logging-format=json: zap's JSON encoder behind zapr, klog's KObj/KRef):
 *   {"ts":<ms since the epoch>,"caller":"dir/file.c:line","msg":"<sentence>",
 *    "Machine":{..},"Cluster":{..},"v":<0|4>,"event":"<id>",...,"err":"<error text>"}
 * (the objects where CAPI's controllers have theirs, in the logger's context before v).
 * No "level" key. info and warn lines are klog's Info at V(0), debug at V(4); error lines are
 * klog's ErrorS: no "v". The error text is "err", written last as zapr writes it: the key
 * "error" on any line, and on warn and error lines the key the event names in log.c's table
 * (e.g. backend-error's "detail"). The object keys below are {"name","namespace"} objects,
 * so one query finds a Machine in CAPI's lines and in hvupdater's. */
enum hv_log_format { HV_LOG_FORMAT_HVUPDATER = 0, HV_LOG_FORMAT_CAPI };
void hv_log_set_format(enum hv_log_format f);
/* The format / level of a name (hvupdater, capi / debug, info, warn, error); -1 if unknown. */
int hv_log_format_from_name(const char *name);
int hv_log_level_from_name(const char *name);
/* Set the format from its name; -1 for an unknown name. */
int hv_log_set_format_name(const char *name);

void hv_log_set_level(enum hv_log_level l);
/* Set the level from its name (debug, info, warn, error); -1 for an unknown name. */
int hv_log_set_level_name(const char *name);
int hv_log_enabled(enum hv_log_level l);
/* The capi format's msg for an event id ("hook" -> "Hook call answered"); NULL for an id the
 * table lacks (such a line's msg is the id itself). */
const char *hv_log_event_message(const char *event);

/* hv_log(HV_LOG_INFO, "hook", "hook", "CanUpdateMachine", "status", "Success", NULL):
 * string pairs, NULL-terminated. A key starting with '#' marks a raw JSON value (numbers).
 * A key starting with '@' names a Kubernetes object by its Kind ("@Machine", "@MachineSet",
 * "@Cluster") with the value "namespace/name", or "name" for an object in the namespace of
 * the object before it (a Cluster is in its Machine's namespace). The hvupdater format
 * writes it as a string under the Kind with a lower-case first letter ("machine"); the
 * capi format as "Machine":{"name":..,"namespace":..}. An empty value is left out.
 * hv_log is a macro passing the caller's file and line (the capi format's "caller") to the
 * function of the same name. */
void(hv_log)(const char *file, int line, enum hv_log_level l, const char *event, ...)
    __attribute__((sentinel));
#define hv_log(...) hv_log(__FILE__, __LINE__, __VA_ARGS__)

#endif
