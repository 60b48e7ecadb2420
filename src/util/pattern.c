/* pattern.c: see pattern.h. POSIX regcomp/regexec in the C locale's byte semantics. */
#include "pattern.h"

#include <regex.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

bool hv_re_match(const char *ere, const char *s)
{
    regex_t re;
    if (regcomp(&re, ere, REG_EXTENDED | REG_NOSUB) != 0)
        return false;
    bool ok = regexec(&re, s, 0, NULL, 0) == 0;
    regfree(&re);
    return ok;
}

bool hv_uri_ok(const char *s)
{
    if (!hv_re_match(
            "^[A-Za-z][A-Za-z0-9+.-]*:([]A-Za-z0-9._~!$&'()*+,;=:@/?#[-]|%[0-9A-Fa-f]{2})*$", s))
        return false;
    const char *hash = strchr(s, '#');
    if (hash && strchr(hash + 1, '#'))
        return false;
    const char *p = strchr(s, ':') + 1;
    if (strncmp(p, "//", 2) != 0)
        return true;
    p += 2;
    size_t n = strcspn(p, "/?#");
    const char *host = p, *end = p + n;
    for (const char *q = p; q < end; q++) /* the host part follows the last '@' */
        if (*q == '@')
            host = q + 1;
    const char *open = memchr(host, '[', (size_t)(end - host));
    const char *close = memchr(host, ']', (size_t)(end - host));
    if (!open != !close)
        return false;
    const char *port = NULL;
    if (open) {
        const char *colon = memchr(close, ':', (size_t)(end - close));
        port = colon ? colon + 1 : NULL;
    } else {
        const char *colon = memchr(host, ':', (size_t)(end - host));
        port = colon ? colon + 1 : NULL;
    }
    if (!port || port == end)
        return true;
    if (end - port > 5 || strspn(port, "0123456789") < (size_t)(end - port))
        return false;
    return strtol(port, NULL, 10) <= 65535;
}
