/* kevent.c: the sink for Warning Events (kevent.h); a pointer pair, set once at start. */
#include "kevent.h"

#include <stddef.h>

static hv_kevent_sink_fn sink;
static void *sink_ctx;

void hv_kevent_set_sink(hv_kevent_sink_fn fn, void *ctx)
{
    sink = fn;
    sink_ctx = ctx;
}

int hv_kevent_enabled(void)
{
    return sink != NULL;
}

void hv_kevent_report(const struct hv_kevent *e)
{
    if (sink)
        sink(e, sink_ctx);
}
