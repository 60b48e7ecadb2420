/* settings.c: parse and validate policy settings. Names and values are matched exactly
 * (as documented), so a typo is a clear Failure instead of a silently ignored policy. */
#include "settings.h"
#include "msg.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const pc_names[] = {"IfNeeded", "Never", NULL};
static const char *const unc_names[] = {"Fallback", "Block", NULL};
static const char *const pom_names[] = {"TrySoft", "Soft", "Hard", NULL};
static const char *const gc_names[] = {"IfAvailable", "Required", "Off", NULL};

const char *hv_power_cycle_name(enum hv_power_cycle v)
{
    return pc_names[v];
}

const char *hv_on_uncoverable_name(enum hv_on_uncoverable v)
{
    return unc_names[v];
}

const char *hv_power_off_mode_name(enum hv_power_off_mode v)
{
    return pom_names[v];
}

const char *hv_guest_check_name(enum hv_guest_check v)
{
    return gc_names[v];
}

bool hv_settings_equal(const struct hv_settings *a, const struct hv_settings *b)
{
    return a->power_cycle == b->power_cycle && a->on_uncoverable == b->on_uncoverable &&
           a->power_off_mode == b->power_off_mode && a->guest_check == b->guest_check &&
           a->live_timeout_s == b->live_timeout_s &&
           a->shutdown_timeout_s == b->shutdown_timeout_s && a->deadline_s == b->deadline_s;
}

void hv_settings_default(struct hv_settings *s)
{
    s->power_cycle = HV_PC_IF_NEEDED;
    s->on_uncoverable = HV_UNC_FALLBACK;
    s->power_off_mode = HV_POM_TRY_SOFT;
    s->guest_check = HV_GC_IF_AVAILABLE;
    s->live_timeout_s = 120;
    s->shutdown_timeout_s = 300;
    s->deadline_s = 1800;
}

static int pick(const char *const *names, const char *key, const char *val, int *out, char *err,
                size_t errlen)
{
    for (int k = 0; names[k]; k++) {
        if (!strcmp(names[k], val)) {
            *out = k;
            return 0;
        }
    }
    char allowed[96] = "";
    for (int k = 0; names[k]; k++) {
        strncat(allowed, k ? "|" : "", sizeof(allowed) - strlen(allowed) - 1);
        strncat(allowed, names[k], sizeof(allowed) - strlen(allowed) - 1);
    }
    snprintf(err, errlen, HV_MSG("setting %s has an invalid value (want %s)"), key, allowed);
    return -1;
}

static int seconds(const char *key, const char *val, int max, int *out, char *err, size_t errlen)
{
    /* Digits only: strtol alone would also take " 60", "+60" and "060". */
    char *end = NULL;
    errno = 0;
    long v = val[0] >= '1' && val[0] <= '9' && strspn(val, "0123456789") == strlen(val) &&
                     strlen(val) <= 9
                 ? strtol(val, &end, 10)
                 : 0;
    if (errno || !end || *end || v < 1 || v > max) {
        snprintf(err, errlen, HV_MSG("setting %s must be a whole number of seconds from 1 to %d"),
                 key, max);
        return -1;
    }
    *out = (int)v;
    return 0;
}

int hv_settings_apply(struct hv_settings *s, const hj *settings, char *err, size_t errlen)
{
    if (!settings || settings->type == HJ_NULL)
        return 0;
    if (settings->type != HJ_OBJECT) {
        snprintf(err, errlen, HV_MSG("settings must be a map of strings"));
        return -1;
    }
    /* Check in sorted key order so the message names the same setting every time. */
    const char *bad = NULL;
    for (size_t k = 0; k < settings->n; k++) {
        const char *key = settings->keys[k];
        const hj *v = settings->items[k];
        int rc, tmp;
        char e[200];
        if (v->type != HJ_STRING) {
            snprintf(e, sizeof(e), HV_MSG("setting %s must be a string"), key);
            rc = -1;
        } else if (!strcmp(key, "powerCycle")) {
            rc = pick(pc_names, key, v->s, &tmp, e, sizeof(e));
            if (!rc)
                s->power_cycle = (enum hv_power_cycle)tmp;
        } else if (!strcmp(key, "onUncoverable")) {
            rc = pick(unc_names, key, v->s, &tmp, e, sizeof(e));
            if (!rc)
                s->on_uncoverable = (enum hv_on_uncoverable)tmp;
        } else if (!strcmp(key, "powerOffMode")) {
            rc = pick(pom_names, key, v->s, &tmp, e, sizeof(e));
            if (!rc)
                s->power_off_mode = (enum hv_power_off_mode)tmp;
        } else if (!strcmp(key, "guestVerification")) {
            rc = pick(gc_names, key, v->s, &tmp, e, sizeof(e));
            if (!rc)
                s->guest_check = (enum hv_guest_check)tmp;
        } else if (!strcmp(key, "liveTimeoutSeconds")) {
            rc = seconds(key, v->s, 86400, &s->live_timeout_s, e, sizeof(e));
        } else if (!strcmp(key, "shutdownTimeoutSeconds")) {
            rc = seconds(key, v->s, 86400, &s->shutdown_timeout_s, e, sizeof(e));
        } else if (!strcmp(key, "deadlineSeconds")) {
            rc = seconds(key, v->s, 604800, &s->deadline_s, e, sizeof(e));
        } else {
            snprintf(
                e, sizeof(e),
                HV_MSG(
                    "unknown setting %s (known: powerCycle, onUncoverable, "
                    "powerOffMode, guestVerification, liveTimeoutSeconds, shutdownTimeoutSeconds, "
                    "deadlineSeconds)"),
                key);
            rc = -1;
        }
        if (rc < 0 && (!bad || strcmp(key, bad) < 0)) {
            bad = key;
            snprintf(err, errlen, "%s", e);
        }
    }
    return bad ? -1 : 0;
}
