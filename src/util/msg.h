/* msg.h: HV_MSG marks a stable, user-visible message template (CAPI shows these in
 * conditions, HTTP clients in error bodies). docs/messages.md lists every one; the docs test
 * fails when the code holds one the catalog lacks. Expands to the literal itself. */
#ifndef HV_MSG_H
#define HV_MSG_H

#ifndef HV_MSG
#define HV_MSG(s) s
#endif

#endif
