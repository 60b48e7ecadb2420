/* pattern.h: the value patterns the config loader shares with schemas/config.json. Each is a
 * POSIX extended regular expression written to match exactly what the schema's ECMA pattern
 * of the same name matches (ASCII \s is [[:space:]]), so that the loader and a JSON Schema
 * validator judge every config the same (test/schema/config_diff.py checks that). */
#ifndef HV_PATTERN_H
#define HV_PATTERN_H

#include <stdbool.h>

#define HV_RE_IPV4                                                                                 \
    "((25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])\\.){3}(25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-"  \
    "9])"
#define HV_RE_H16 "[0-9A-Fa-f]{1,4}"
#define HV_RE_IPV6                                                                                 \
    "((" HV_RE_H16 ":){7}" HV_RE_H16 "|(" HV_RE_H16 ":){1,7}:|(" HV_RE_H16 ":){1,6}:" HV_RE_H16    \
    "|(" HV_RE_H16 ":){1,5}(:" HV_RE_H16 "){1,2}|(" HV_RE_H16 ":){1,4}(:" HV_RE_H16                \
    "){1,3}|(" HV_RE_H16 ":){1,3}(:" HV_RE_H16 "){1,4}|(" HV_RE_H16 ":){1,2}(:" HV_RE_H16          \
    "){1,5}|" HV_RE_H16 ":(:" HV_RE_H16 "){1,6}|:((:" HV_RE_H16 "){1,7}|:))"
#define HV_RE_PORT                                                                                 \
    "(6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5][0-9]{4}|[1-9][0-9]{0,3})"
/* listen: a numeric IPv4 address or a bracketed IPv6 one, and a port 1..65535. */
#define HV_RE_LISTEN "^(" HV_RE_IPV4 "|\\[" HV_RE_IPV6 "\\]):" HV_RE_PORT "$"
/* A libvirt URI: scheme://, user@ allowed, user:password@ not. */
#define HV_RE_LIBVIRT_URI                                                                          \
    "^[A-Za-z][A-Za-z0-9+.-]*://([^[:space:]/?#@:]*@)?[^[:space:]/?#@]*([/?#][^[:space:]]*)?$"
/* A vCenter SDK URL: https, a host, no user info. */
#define HV_RE_VSPHERE_URL "^https://[^[:space:]/?#@]+(/[^[:space:]]*)?$"
#define HV_RE_SERVER_NAME "^[^[:space:]]+$"
#define HV_RE_THUMBPRINT                                                                           \
    "^([0-9A-Fa-f]{40}|[0-9A-Fa-f]{64}|[0-9A-Fa-f]{2}(:[0-9A-Fa-f]{2}){19}|[0-9A-Fa-f]{2}(:[0-9A-" \
    "Fa-f]{2}){31})$"
#define HV_RE_KUBE_KIND    "^[A-Z][A-Za-z0-9]*$"
#define HV_RE_DNS1123_SUB  "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
#define HV_RE_KUBE_VERSION "^v[1-9][0-9]*((alpha|beta)[1-9][0-9]*)?$"
#define HV_RE_JSON_POINTER "^(/([^/~]|~[01])*)+$"
#define HV_RE_PROVIDER_ID  "^[a-z][a-z0-9+.-]*://[^[:space:]]*$"

/* An absolute URI as the schema's "format": "uri" judges it: RFC 3986 characters only, at
 * most one '#', and a port (if any) of digits from 0 to 65535. */
bool hv_uri_ok(const char *s);

/* Whether s matches the extended regular expression ere (compiled on each call: the loader
 * runs once per start). An expression that does not compile matches nothing. */
bool hv_re_match(const char *ere, const char *s);

#endif
