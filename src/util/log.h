/* log.h: structured logs, one JSON object per line on stderr. Callers pass key/value pairs;
 * values are escaped here. Never log credentials: callers pass only names and codes. */
#ifndef HV_LOG_H
#define HV_LOG_H

enum hv_log_level { HV_LOG_DEBUG = 0, HV_LOG_INFO, HV_LOG_WARN, HV_LOG_ERROR };

void hv_log_set_level(enum hv_log_level l);
/* Set the level from its name (debug, info, warn, error); -1 for an unknown name. */
int hv_log_set_level_name(const char *name);
int hv_log_enabled(enum hv_log_level l);
/* hv_log(HV_LOG_INFO, "hook", "hook", "CanUpdateMachine", "status", "Success", NULL):
 * string pairs, NULL-terminated. A key starting with '#' marks a raw JSON value (numbers). */
void hv_log(enum hv_log_level l, const char *event, ...) __attribute__((sentinel));

#endif
