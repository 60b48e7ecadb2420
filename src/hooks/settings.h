/* settings.h: policy knobs from ExtensionConfig.spec.settings (a string map in each request),
 * over defaults from the config file. Plain values; nothing to free. */
#ifndef HV_SETTINGS_H
#define HV_SETTINGS_H

#include <stdbool.h>
#include "json.h"

enum hv_power_cycle { HV_PC_IF_NEEDED = 0, HV_PC_NEVER };
enum hv_on_uncoverable { HV_UNC_FALLBACK = 0, HV_UNC_BLOCK };
enum hv_power_off_mode { HV_POM_TRY_SOFT = 0, HV_POM_SOFT, HV_POM_HARD };
/* Whether "done" waits for the guest's own view (balloon statistics, guest agent). */
enum hv_guest_check { HV_GC_IF_AVAILABLE = 0, HV_GC_REQUIRED, HV_GC_OFF };

struct hv_settings {
    enum hv_power_cycle power_cycle;
    enum hv_on_uncoverable on_uncoverable;
    enum hv_power_off_mode power_off_mode;
    enum hv_guest_check guest_check;
    int live_timeout_s;     /* how long a live change may take to show (e.g. guest plugging) */
    int shutdown_timeout_s; /* graceful shutdown wait before hard power-off (TrySoft) */
    int deadline_s;         /* whole operation */
};

void hv_settings_default(struct hv_settings *s);
/* Same settings, field by field. */
bool hv_settings_equal(const struct hv_settings *a, const struct hv_settings *b);
/* Overlay a JSON settings object (string values; NULL or absent = no change) onto *s.
 * Unknown keys and bad values fail with a stable message naming the setting. */
int hv_settings_apply(struct hv_settings *s, const hj *settings, char *err, size_t errlen);
const char *hv_power_cycle_name(enum hv_power_cycle v);
const char *hv_on_uncoverable_name(enum hv_on_uncoverable v);
const char *hv_power_off_mode_name(enum hv_power_off_mode v);
const char *hv_guest_check_name(enum hv_guest_check v);

#endif
