/* respond.c: see respond.h. */
#include "respond.h"

#include <stdlib.h>

enum MHD_Result hv_respond(struct MHD_Connection *c, unsigned code, const char *type,
                           char *body_take, size_t len, const char *allow, bool close, bool *made)
{
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(len, body_take, MHD_RESPMEM_MUST_FREE);
    if (made)
        *made = resp != NULL;
    if (!resp) {
        free(body_take);
        return MHD_NO;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    if (allow)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, allow);
    if (code == 503) /* busy or not ready: a client may come back in a second */
        MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, "1");
    if (close)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
    enum MHD_Result rc = MHD_queue_response(c, code, resp);
    MHD_destroy_response(resp);
    return rc;
}
