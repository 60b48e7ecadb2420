/* failpoint.h: crash injection for tests. When the environment variable HV_FAILPOINT names a
 * point (comma-separated, e.g. "before:shutdown,after:reconfigure"), reaching it kills the
 * process with SIGKILL, as a node failure would. Unset in production: one getenv at start. */
#ifndef HV_FAILPOINT_H
#define HV_FAILPOINT_H

void hv_failpoint(const char *point);

#endif
