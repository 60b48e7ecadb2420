/* vs_xml.c: request text building with escaping, response parsing with libxml2 under tight
 * options, and vim25 faults mapped to hvupdater's stable codes.
 *
 * Nothing here does I/O; vs_buf memory is owned by the buffer, parsed documents by the
 * caller. Fault text read from the server only ever lands in hv_err.detail.
 */
#include "vs_xml.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <libxml/parser.h>

#define XSI_NS "http://www.w3.org/2001/XMLSchema-instance"

void vs_buf_init(struct vs_buf *b)
{
    memset(b, 0, sizeof(*b));
}

void vs_buf_free(struct vs_buf *b)
{
    if (b->data) {
        explicit_bzero(b->data, b->cap);
        free(b->data);
    }
    memset(b, 0, sizeof(*b));
}

static bool buf_reserve(struct vs_buf *b, size_t extra)
{
    if (b->failed)
        return false;
    if (b->len + extra + 1 <= b->cap)
        return true;
    size_t cap = b->cap ? b->cap : 1024;
    while (cap < b->len + extra + 1)
        cap *= 2;
    /* Grow by copy, not realloc, so an abandoned block never keeps a password. */
    char *p = malloc(cap);
    if (!p) {
        b->failed = true;
        return false;
    }
    if (b->data) {
        memcpy(p, b->data, b->len);
        explicit_bzero(b->data, b->cap);
        free(b->data);
    }
    b->data = p;
    b->cap = cap;
    b->data[b->len] = '\0';
    return true;
}

void vs_buf_addn(struct vs_buf *b, const char *data, size_t len)
{
    if (!buf_reserve(b, len))
        return;
    memcpy(b->data + b->len, data, len);
    b->len += len;
    b->data[b->len] = '\0';
}

void vs_buf_add(struct vs_buf *b, const char *text)
{
    vs_buf_addn(b, text, strlen(text));
}

void vs_buf_addf(struct vs_buf *b, const char *fmt, ...)
{
    char small[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof(small), fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->failed = true;
        return;
    }
    if ((size_t)n < sizeof(small)) {
        vs_buf_addn(b, small, (size_t)n);
        return;
    }
    if (!buf_reserve(b, (size_t)n))
        return;
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

/* Length of the valid UTF-8 sequence at s (1-4), or 0 when invalid or not an XML Char. */
static size_t utf8_char(const unsigned char *s)
{
    unsigned c = s[0];
    if (c < 0x80)
        return 1;
    size_t n;
    unsigned cp;
    if ((c & 0xE0) == 0xC0) {
        n = 2;
        cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
        n = 3;
        cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
        n = 4;
        cp = c & 0x07;
    } else {
        return 0;
    }
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    static const unsigned min[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF) || cp == 0xFFFE ||
        cp == 0xFFFF)
        return 0;
    return n;
}

void vs_buf_esc(struct vs_buf *b, const char *text)
{
    const unsigned char *s = (const unsigned char *)text;
    while (*s && !b->failed) {
        const char *rep = NULL;
        switch (*s) {
        case '&':
            rep = "&amp;";
            break;
        case '<':
            rep = "&lt;";
            break;
        case '>':
            rep = "&gt;";
            break;
        case '"':
            rep = "&quot;";
            break;
        case '\'':
            rep = "&apos;";
            break;
        case '\r':
            rep = "&#13;"; /* a raw CR would be normalised away by the reader */
            break;
        default:
            break;
        }
        if (rep) {
            vs_buf_add(b, rep);
            s++;
            continue;
        }
        if (*s < 0x20 && *s != '\t' && *s != '\n') {
            b->failed = true;
            return;
        }
        size_t n = utf8_char(s);
        if (n == 0) {
            b->failed = true;
            return;
        }
        vs_buf_addn(b, (const char *)s, n);
        s += n;
    }
}

void vs_buf_elem(struct vs_buf *b, const char *name, const char *value)
{
    vs_buf_addf(b, "<%s>", name);
    vs_buf_esc(b, value);
    vs_buf_addf(b, "</%s>", name);
}

void vs_buf_elem_i64(struct vs_buf *b, const char *name, long long value)
{
    vs_buf_addf(b, "<%s>%lld</%s>", name, value, name);
}

void vs_buf_moref(struct vs_buf *b, const char *name, const char *type, const char *value)
{
    vs_buf_addf(b, "<%s type=\"", name);
    vs_buf_esc(b, type);
    vs_buf_add(b, "\">");
    vs_buf_esc(b, value);
    vs_buf_addf(b, "</%s>", name);
}

void vs_env_begin(struct vs_buf *b, const char *method, const char *this_type,
                  const char *this_value)
{
    vs_buf_add(b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>"
                  "<soapenv:Envelope xmlns:soapenv=\"http://schemas.xmlsoap.org/soap/envelope/\""
                  " xmlns:xsd=\"http://www.w3.org/2001/XMLSchema\""
                  " xmlns:xsi=\"" XSI_NS "\"><soapenv:Body>");
    vs_buf_addf(b, "<%s xmlns=\"urn:vim25\">", method);
    vs_buf_moref(b, "_this", this_type, this_value);
}

void vs_env_end(struct vs_buf *b, const char *method)
{
    vs_buf_addf(b, "</%s></soapenv:Body></soapenv:Envelope>", method);
}

int vs_err(struct hv_err *err, enum hv_errcode code, const char *fmt, ...)
{
    if (err) {
        err->code = code;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->detail, sizeof(err->detail), fmt, ap);
        va_end(ap);
    }
    return code;
}

xmlDocPtr vs_xml_parse(const char *data, size_t len, struct hv_err *err)
{
    if (len > VS_RESPONSE_MAX || len > (size_t)INT_MAX) {
        vs_err(err, HV_E_INTERNAL, "response larger than %zu bytes", VS_RESPONSE_MAX);
        return NULL;
    }
    /* No XML_PARSE_NOENT (entities stay unexpanded), no DTDLOAD/DTDATTR, no network. */
    int opts = XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING | XML_PARSE_NOCDATA;
    xmlDocPtr doc = xmlReadMemory(data, (int)len, "vsphere-response.xml", NULL, opts);
    if (!doc) {
        vs_err(err, HV_E_INTERNAL, "response is not well-formed XML");
        return NULL;
    }
    if (doc->intSubset || doc->extSubset) {
        xmlFreeDoc(doc);
        vs_err(err, HV_E_INTERNAL, "response carries a DTD");
        return NULL;
    }
    return doc;
}

bool vs_xml_is(xmlNodePtr node, const char *name)
{
    return node && node->type == XML_ELEMENT_NODE &&
           (!name || xmlStrEqual(node->name, (const xmlChar *)name));
}

xmlNodePtr vs_xml_child(xmlNodePtr node, const char *name)
{
    if (!node)
        return NULL;
    for (xmlNodePtr c = node->children; c; c = c->next)
        if (vs_xml_is(c, name))
            return c;
    return NULL;
}

xmlNodePtr vs_xml_next(xmlNodePtr node, const char *name)
{
    if (!node)
        return NULL;
    for (xmlNodePtr c = node->next; c; c = c->next)
        if (vs_xml_is(c, name))
            return c;
    return NULL;
}

xmlNodePtr vs_xml_body(xmlDocPtr doc)
{
    xmlNodePtr env = doc ? xmlDocGetRootElement(doc) : NULL;
    if (!vs_xml_is(env, "Envelope"))
        return NULL;
    xmlNodePtr body = vs_xml_child(env, "Body");
    return vs_xml_child(body, NULL);
}

bool vs_xml_text(xmlNodePtr node, char *out, size_t outlen)
{
    if (outlen)
        out[0] = '\0';
    if (!node)
        return false;
    xmlChar *t = xmlNodeGetContent(node);
    if (!t)
        return false;
    size_t n = strlen((const char *)t);
    bool fits = n < outlen;
    if (outlen) {
        size_t copy = fits ? n : outlen - 1;
        memcpy(out, t, copy);
        out[copy] = '\0';
    }
    xmlFree(t);
    return fits;
}

bool vs_xml_child_text(xmlNodePtr node, const char *name, char *out, size_t outlen)
{
    return vs_xml_text(vs_xml_child(node, name), out, outlen);
}

void vs_xml_xsi_type(xmlNodePtr node, char *out, size_t outlen)
{
    out[0] = '\0';
    if (!node)
        return;
    xmlChar *t = xmlGetNsProp(node, (const xmlChar *)"type", (const xmlChar *)XSI_NS);
    if (!t)
        return;
    const char *s = (const char *)t;
    const char *colon = strrchr(s, ':');
    snprintf(out, outlen, "%s", colon ? colon + 1 : s);
    xmlFree(t);
}

bool vs_xml_fault(xmlNodePtr node, struct vs_fault *f)
{
    if (!vs_xml_is(node, "Fault"))
        return false;
    memset(f, 0, sizeof(*f));
    vs_xml_child_text(node, "faultstring", f->message, sizeof(f->message));
    xmlNodePtr detail = vs_xml_child(vs_xml_child(node, "detail"), NULL);
    if (detail) {
        vs_xml_xsi_type(detail, f->type, sizeof(f->type));
        if (!f->type[0]) {
            /* <InvalidPowerStateFault> without xsi:type: drop the "Fault" suffix. */
            const char *name = (const char *)detail->name;
            size_t n = strlen(name);
            if (n > 5 && strcmp(name + n - 5, "Fault") == 0)
                n -= 5;
            snprintf(f->type, sizeof(f->type), "%.*s", (int)n, name);
        }
    }
    if (!f->type[0]) {
        /* No detail: keep the SOAP fault code (e.g. ServerFaultCode) for the log. */
        vs_xml_child_text(node, "faultcode", f->type, sizeof(f->type));
    }
    return true;
}

void vs_xml_method_fault(xmlNodePtr node, struct vs_fault *f)
{
    memset(f, 0, sizeof(*f));
    vs_xml_xsi_type(vs_xml_child(node, "fault"), f->type, sizeof(f->type));
    vs_xml_child_text(node, "localizedMessage", f->message, sizeof(f->message));
    if (!f->type[0])
        snprintf(f->type, sizeof(f->type), "UnknownFault");
}

static const struct {
    const char *type;
    enum hv_errcode code;
} fault_codes[] = {
    {"NotAuthenticated", HV_E_AUTH},
    {"InvalidLogin", HV_E_AUTH},
    {"NoPermission", HV_E_AUTH},
    {"NotAuthorized", HV_E_AUTH},
    {"InvalidPowerState", HV_E_INVALID_STATE},
    {"InvalidState", HV_E_INVALID_STATE},
    {"InvalidHostState", HV_E_INVALID_STATE},
    {"VmPowerOnDisabled", HV_E_INVALID_STATE},
    {"ToolsUnavailable", HV_E_INVALID_STATE},
    {"ToolsInstallationInProgress", HV_E_INVALID_STATE},
    {"TaskInProgress", HV_E_BUSY},
    {"ConcurrentAccess", HV_E_BUSY},
    {"ResourceInUse", HV_E_BUSY},
    {"InsufficientResourcesFault", HV_E_RESOURCES},
    {"NotEnoughLicenses", HV_E_RESOURCES},
    {"NoDiskSpace", HV_E_RESOURCES}, /* a disk growth the datastore cannot hold */
    {"FileTooLarge", HV_E_UNSUPPORTED},
    {"InvalidDeviceSpec", HV_E_UNSUPPORTED},
    {"InvalidDeviceOperation", HV_E_UNSUPPORTED},
    {"NotSupported", HV_E_UNSUPPORTED},
    {"NotImplemented", HV_E_UNSUPPORTED},
    {"MethodDisabled", HV_E_UNSUPPORTED},
    {"MemoryHotPlugNotSupported", HV_E_UNSUPPORTED},
    {"CpuHotPlugNotSupported", HV_E_UNSUPPORTED},
    {"DeviceUnsupportedForVmVersion", HV_E_UNSUPPORTED},
    {"InvalidVmConfig", HV_E_UNSUPPORTED},
    {"VmConfigFault", HV_E_UNSUPPORTED},
    {"ManagedObjectNotFound", HV_E_NOT_FOUND},
    {"HostNotConnected", HV_E_UNREACHABLE},
    {"HostNotReachable", HV_E_UNREACHABLE},
    {"HostCommunication", HV_E_UNREACHABLE},
    {"Timedout", HV_E_TIMEOUT},
};

enum hv_errcode vs_fault_code(const char *type)
{
    for (size_t i = 0; i < sizeof(fault_codes) / sizeof(fault_codes[0]); i++)
        if (strcmp(type, fault_codes[i].type) == 0)
            return fault_codes[i].code;
    /* InsufficientMemoryResourcesFault, InsufficientHostCapacityFault, ... */
    if (strncmp(type, "Insufficient", 12) == 0)
        return HV_E_RESOURCES;
    return HV_E_INTERNAL;
}

int vs_fault_err(const struct vs_fault *f, const char *what, struct hv_err *err)
{
    return vs_err(err, vs_fault_code(f->type), "%s: %s: %s", what, f->type,
                  f->message[0] ? f->message : "(no message)");
}
