/* failpoint.c: see failpoint.h. The variable is read once; matching is exact per item. */
#include "failpoint.h"
#include "log.h"

#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

static const char *points;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void load(void)
{
    points = getenv("HV_FAILPOINT");
}

void hv_failpoint(const char *point)
{
    pthread_once(&once, load);
    if (!points || !points[0])
        return;
    size_t n = strlen(point);
    for (const char *p = points; *p;) {
        size_t len = strcspn(p, ",");
        if (len == n && !strncmp(p, point, n)) {
            hv_log(HV_LOG_WARN, "failpoint", "point", point, (char *)NULL);
            raise(SIGKILL);
        }
        p += len + (p[len] == ',');
    }
}
