/* respond.h: how both listeners (server.c, statusd.c) queue an answer with libmicrohttpd. */
#ifndef HV_RESPOND_H
#define HV_RESPOND_H

#include <microhttpd.h>
#include <stdbool.h>
#include <stddef.h>

/* Queue status code with body_take (malloc'd; freed here in every case), its Content-Type,
 * an Allow header when allow is set, and Connection: close when close is true. *made (may be
 * NULL) says whether a response could be made at all (MHD_NO is returned when not). */
enum MHD_Result hv_respond(struct MHD_Connection *c, unsigned code, const char *type,
                           char *body_take, size_t len, const char *allow, bool close, bool *made);

#endif
