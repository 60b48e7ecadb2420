/* hv_quantity.h: a Kubernetes resource quantity ("4Gi", "4096Mi", "1.5G", "4294967296") read as
 * bytes. Shared by the KubeVirt backend (VM spec and VMI status) and src/hooks (the quantity
 * unit of a kind profile, e.g. KubevirtMachine's memory.guest): both must read the same text as
 * the same size. Pure, header-only (the backends room is headers).
 *
 * Accepted: an optional '+', decimal digits with an optional fraction, then one suffix of
 * Ki Mi Gi Ti Pi Ei (powers of 1024), k M G T P E (powers of 1000), an exponent e<N>/E<N>, or
 * none (bytes). The size must be a whole number of bytes, at most INT64_MAX; "" , a sign '-',
 * the milli suffix 'm' and anything else answer -1 (a memory size is never negative or a
 * fraction of a byte).
 */
#ifndef HV_QUANTITY_H
#define HV_QUANTITY_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

static inline int64_t hv_quantity_bytes(const char *s)
{
    if (!s)
        return -1;
    if (*s == '+')
        s++;
    /* mantissa as an integer m and a count of fraction digits fd: value = m / 10^fd */
    unsigned __int128 m = 0;
    int fd = 0, digits = 0;
    bool dot = false;
    for (; (*s >= '0' && *s <= '9') || (*s == '.' && !dot); s++) {
        if (*s == '.') {
            dot = true;
            continue;
        }
        if (m > (unsigned __int128)UINT64_MAX * 1000) /* far beyond INT64_MAX whatever follows */
            return -1;
        m = m * 10 + (unsigned)(*s - '0');
        digits++;
        if (dot)
            fd++;
    }
    if (!digits || fd > 18)
        return -1;
    unsigned __int128 mul = 1;
    int dec_exp = 0;
    static const char bin[] = "KMGTPE";
    static const char dec[] = "kMGTPE";
    if (s[0] && s[1] == 'i' && !s[2]) {
        const char *p = strchr(bin, s[0]);
        if (!p)
            return -1;
        for (long k = 0; k <= p - bin; k++)
            mul *= 1024;
    } else if ((s[0] == 'e' || s[0] == 'E') && s[1]) {
        int e = 0;
        for (const char *q = s + 1; *q; q++) {
            if (*q < '0' || *q > '9' || e > 18)
                return -1;
            e = e * 10 + (*q - '0');
        }
        if (e > 18)
            return -1;
        dec_exp = e;
    } else if (s[0] && !s[1]) {
        const char *p = strchr(dec, s[0]);
        if (!p)
            return -1;
        dec_exp = 3 * (int)(p - dec + 1);
    } else if (s[0]) {
        return -1;
    }
    /* value = m * mul * 10^dec_exp / 10^fd */
    unsigned __int128 v = m * mul;
    while (dec_exp > 0 && fd > 0) {
        dec_exp--;
        fd--;
    }
    for (; dec_exp > 0; dec_exp--) {
        if (v > (unsigned __int128)INT64_MAX)
            return -1;
        v *= 10;
    }
    unsigned __int128 div = 1;
    for (; fd > 0; fd--)
        div *= 10;
    if (v % div)
        return -1;
    v /= div;
    if (v > (unsigned __int128)INT64_MAX)
        return -1;
    return (int64_t)v;
}

#endif
