/* kevents.h: serve --kube-events: post the hooks' Warning Events (util/kevent.h) to the
 * Kubernetes API as core/v1 Events, with the pod's service account (its token re-read for
 * every post, so a rotated token is used). One worker thread and a bounded queue, so a hook
 * answer never waits for the API server; the same event (object, reason, message) is posted
 * once per 10 minutes, however often CAPI retries. */
#ifndef HV_KEVENTS_H
#define HV_KEVENTS_H

#include <stddef.h>

struct hv_kevents;

/* From the in-cluster environment: KUBERNETES_SERVICE_HOST and _PORT, and the service
 * account directory (token, ca.crt) $HVUPDATER_SERVICEACCOUNT_DIR, default
 * /var/run/secrets/kubernetes.io/serviceaccount. Starts the worker and sets the sink.
 * NULL with a message in err when the environment is not there. */
struct hv_kevents *hv_kevents_start(char *err, size_t errlen);
/* Clears the sink, posts what is queued (bounded), stops the worker. */
void hv_kevents_stop(struct hv_kevents *k);

#endif
