/* conntrack.h: deadlines for a libmicrohttpd listener's connections.
 *
 * libmicrohttpd's own timeout counts idle time only, so a client that sends a byte now and
 * then keeps a connection (and its slot under the connection limits) for ever. A tracker
 * keeps every connection of one daemon in a list with a deadline by which its next step must
 * be done (a new connection: its TLS handshake and first request head within head_timeout;
 * after that what the listener sets with hv_conn_deadline), and a thread of its own shuts down
 * the socket of each connection past its deadline, four times a second; libmicrohttpd then
 * closes it as if the client had. It also shuts down idle connections whose peer has closed
 * (a safety net for closes libmicrohttpd misses).
 *
 * Use: hv_conntrack_start before MHD_start_daemon, pass hv_conntrack_notify with the tracker
 * as MHD_OPTION_NOTIFY_CONNECTION; hv_conntrack_stop (the thread) before MHD_stop_daemon and
 * hv_conntrack_free after it (libmicrohttpd frees the entries through the notify). */
#ifndef HV_CONNTRACK_H
#define HV_CONNTRACK_H

#include <microhttpd.h>
#include <stdbool.h>

struct hv_conntrack;

/* NULL (with err) when the thread cannot start. */
struct hv_conntrack *hv_conntrack_start(unsigned head_timeout_s, char *err, size_t errlen);
void hv_conntrack_stop(struct hv_conntrack *t);
void hv_conntrack_free(struct hv_conntrack *t);
/* MHD_OPTION_NOTIFY_CONNECTION's callback; cls is the tracker. */
void hv_conntrack_notify(void *cls, struct MHD_Connection *c, void **socket_context,
                         enum MHD_ConnectionNotificationCode code);
/* Whether c's request is in progress (a head came, the answer is not done): such a
 * connection is never taken for an idle one whose peer went away. */
void hv_conn_busy(struct MHD_Connection *c, bool busy);
/* c's next step must be done within seconds from now (no-op once it was shut down). */
void hv_conn_deadline(struct MHD_Connection *c, unsigned seconds);

#endif
