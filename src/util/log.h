/* log.h: structured logs, one JSON object per line on stderr. Callers pass key/value pairs;
 * values are escaped here. Never log credentials: callers pass only names and codes. */
#ifndef HV_LOG_H
#define HV_LOG_H

enum hv_log_level { HV_LOG_DEBUG = 0, HV_LOG_INFO, HV_LOG_WARN, HV_LOG_ERROR };

/* HV_LOG_FORMAT_HVUPDATER: {"ts":"<RFC 3339>","level":..,"event":..,...}.
 * HV_LOG_FORMAT_CAPI: as Cluster API's JSON logs (component-base, --logging-format=json):
 * {"ts":<epoch seconds>,"level":..,"msg":<event>,"v":<verbosity>,...}, with the object keys
 * below written as {"name","namespace"} objects, so one query finds a Machine in both. */
enum hv_log_format { HV_LOG_FORMAT_HVUPDATER = 0, HV_LOG_FORMAT_CAPI };
void hv_log_set_format(enum hv_log_format f);
/* Set the format from its name (hvupdater, capi); -1 for an unknown name. */
int hv_log_set_format_name(const char *name);

void hv_log_set_level(enum hv_log_level l);
/* Set the level from its name (debug, info, warn, error); -1 for an unknown name. */
int hv_log_set_level_name(const char *name);
int hv_log_enabled(enum hv_log_level l);
/* hv_log(HV_LOG_INFO, "hook", "hook", "CanUpdateMachine", "status", "Success", NULL):
 * string pairs, NULL-terminated. A key starting with '#' marks a raw JSON value (numbers).
 * A key starting with '@' names a Kubernetes object by its Kind ("@Machine", "@MachineSet",
 * "@Cluster") with the value "namespace/name", or "name" for an object in the namespace of
 * the object before it (a Cluster is in its Machine's namespace). The hvupdater format
 * writes it as a string under the Kind with a lower-case first letter ("machine"); the
 * capi format as "Machine":{"name":..,"namespace":..}. An empty value is left out. */
void hv_log(enum hv_log_level l, const char *event, ...) __attribute__((sentinel));

#endif
