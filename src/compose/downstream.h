/* downstream.h: the in-place extensions hvupdater chains after itself (config `downstream`),
 * and an HTTPS client that calls them the way CAPI's runtime client does: discovery for the
 * handler names, then POST <url>/hooks.runtime.cluster.x-k8s.io/v1alpha1/<hook>/<handler>.
 * hv_downstream_list owns its strings and settings; a hv_downstream copies its config and
 * is safe to call from several threads. */
#ifndef HV_DOWNSTREAM_H
#define HV_DOWNSTREAM_H

#include "hooks.h"
#include "json.h"

#include <stdint.h>

#define HV_DOWNSTREAM_MAX 8

struct hv_downstream_cfg {
    char *name, *url, *ca_file, *cert_file, *key_file;
    int timeout_s;
    hj *settings; /* NULL: the request's settings pass through unchanged */
};

struct hv_downstream_list {
    struct hv_downstream_cfg *items;
    size_t n;
};

/* Parse the config's `downstream` array into l (replacing what it held). The timeouts must
 * add up to less than handler_timeout_s, the time CAPI gives hvupdater. Returns 0, or -1 with
 * a message naming the key. */
int hv_downstream_cfg_parse(struct hv_downstream_list *l, const hj *arr, int handler_timeout_s,
                            char *err, size_t errlen);
void hv_downstream_list_free(struct hv_downstream_list *l);

struct hv_downstream;

struct hv_downstream *hv_downstream_new(const struct hv_downstream_cfg *c);
void hv_downstream_free(struct hv_downstream *d);
const char *hv_downstream_name(const struct hv_downstream *d);
int hv_downstream_timeout_s(const struct hv_downstream *d);

/* Deadlines are milliseconds of hv_mono_ms() (hv_clock.h). */

/* Run discovery now (bounded by deadline_ms and the downstream's timeout) and keep the
 * handler names. Returns 0, or -1 with a stable reason in why. */
int hv_downstream_discover(struct hv_downstream *d, int64_t deadline_ms, char *why, size_t whylen);

enum hv_ds_result {
    HV_DS_OK = 0, /* *answer holds the decoded answer object */
    HV_DS_SKIP,   /* the downstream registers no handler for this hook */
    HV_DS_ERROR,  /* no usable answer: why says why (stable, names the downstream) */
};

/* Call hook h with req (its settings replaced when the config overrides them), discovering
 * first when the handler names are not known (or a call failed since). The answer's kind
 * and status are checked; its meaning is the caller's. Bounded by deadline_ms. */
enum hv_ds_result hv_downstream_call(struct hv_downstream *d, enum hv_hook h, const hj *req,
                                     int64_t deadline_ms, hj **answer, char *why, size_t whylen);

#endif
