/* events.h: Warning Events (events.k8s.io/v1) on the objects hook calls are about.
 *
 * hv_events_post only copies the event into a small queue and returns (it is called on hook
 * threads); one thread of its own posts them through hv_kube, each bounded by the client's
 * timeout. The same object, reason and note within DEDUP_S seconds is posted once (CAPI
 * repeats a call that failed). A full queue drops the event (logged). hv_events owns its
 * thread and queue; hv_events_free stops the thread and drops what is still queued.
 */
#ifndef HV_EVENTS_H
#define HV_EVENTS_H

#include "kube.h"

struct hv_events;

struct hv_event_obj {
    const char *api_version, *kind, *namespace_, *name, *uid; /* uid may be NULL */
};

/* k is borrowed and must outlive the result; instance names this replica in
 * reportingInstance (e.g. the pod name). NULL when the thread cannot start. */
struct hv_events *hv_events_new(struct hv_kube *k, const char *instance);
/* Queue a Warning Event. Returns at once; never blocks on the network. */
void hv_events_post(struct hv_events *ev, const struct hv_event_obj *obj, const char *reason,
                    const char *note);
/* Wait until the queue is empty and nothing is being posted (tests), at most timeout_ms;
 * 0 when idle. */
int hv_events_flush(struct hv_events *ev, int timeout_ms);
void hv_events_free(struct hv_events *ev);

#endif
