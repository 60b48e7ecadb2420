/* base64.h: RFC 4648 base64 (standard alphabet, padded), as Go encodes []byte in JSON.
 * Both functions return a malloc'd, NUL-terminated buffer the caller frees. */
#ifndef HV_BASE64_H
#define HV_BASE64_H

#include <stddef.h>

char *hv_b64_encode(const void *data, size_t len);
/* NULL when the input is not valid padded base64; *len_out gets the decoded length. */
char *hv_b64_decode(const char *text, size_t len, size_t *len_out);

#endif
