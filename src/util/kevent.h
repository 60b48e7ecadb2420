/* kevent.h: Warning Events about CAPI objects, for operators (optional: serve --kube-events).
 * The hooks report here; serve sets the sink that posts them to the Kubernetes API
 * (cli/kevents.c). Without a sink nothing happens and nothing is kept. */
#ifndef HV_KEVENT_H
#define HV_KEVENT_H

struct hv_kevent {
    char kind[32];        /* Machine, MachineSet */
    char api_version[64]; /* the object's apiVersion as the request gave it */
    char ns[64], name[254], uid[64];
    char reason[64];    /* InvalidSettings, UpdateBlocked, UpdateFailed */
    char message[1024]; /* the Failure message hvupdater answered */
};

typedef void (*hv_kevent_sink_fn)(const struct hv_kevent *e, void *ctx);
/* Set (or with NULL clear) the sink; call before serving, not concurrently with reports. */
void hv_kevent_set_sink(hv_kevent_sink_fn fn, void *ctx);
/* Whether a sink is set (the caller may skip building the event). */
int hv_kevent_enabled(void);
void hv_kevent_report(const struct hv_kevent *e);

#endif
