/* lv_xml.c: libvirt domain XML into struct lv_dominfo, plus the small XML helpers the record
 * code needs. Pure functions on strings (unit-tested without libvirt): every document is
 * parsed with XML_PARSE_NONET and without entity expansion, and freed before returning;
 * strings returned to callers are malloc'd and theirs to free().
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <libxml/parser.h>
#include <libxml/tree.h>
#include <libxml/xpath.h>

#include "lv_internal.h"

#define LV_XML_OPTS (XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING)

static void lv_why(char *why, size_t whylen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void lv_why(char *why, size_t whylen, const char *fmt, ...)
{
    if (!why || !whylen)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, whylen, fmt, ap);
    va_end(ap);
}

long long lv_xml_to_kib(const char *value, const char *unit)
{
    if (!value)
        return -1;
    errno = 0;
    char *end = NULL;
    unsigned long long v = strtoull(value, &end, 10);
    if (errno || end == value || value[0] == '-')
        return -1;
    while (*end == ' ' || *end == '\n' || *end == '\t')
        end++;
    if (*end)
        return -1;
    static const struct {
        const char *name;
        unsigned long long bytes;
    } units[] = {
        {"b", 1ULL},           {"bytes", 1ULL},     {"KB", 1000ULL},     {"k", 1024ULL},
        {"KiB", 1024ULL},      {"MB", 1000000ULL},  {"M", 1ULL << 20},   {"MiB", 1ULL << 20},
        {"GB", 1000000000ULL}, {"G", 1ULL << 30},   {"GiB", 1ULL << 30}, {"TB", 1000000000000ULL},
        {"T", 1ULL << 40},     {"TiB", 1ULL << 40},
    };
    unsigned long long mult = 1024;
    if (unit && *unit) {
        mult = 0;
        for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
            /* like libvirt: case does not matter; "KB" is 1000, "k" and "KiB" 1024 */
            if (strcasecmp(unit, units[i].name) == 0) {
                mult = units[i].bytes;
                break;
            }
        }
        if (!mult)
            return -1;
    }
    if (v > (unsigned long long)LLONG_MAX / mult) /* libvirt's own bound: bytes in a long long */
        return -1;
    unsigned long long bytes = v * mult;
    return (long long)((bytes + 1023) / 1024);
}

int lv_xml_parse_cpuset(const char *s, bool *set, int max)
{
    if (!s)
        return -1;
    memset(set, 0, (size_t)max * sizeof(*set));
    const char *p = s;
    while (*p) {
        while (*p == ' ' || *p == ',')
            p++;
        if (!*p)
            break;
        bool neg = false;
        if (*p == '^') {
            neg = true;
            p++;
        }
        char *end;
        long a = strtol(p, &end, 10);
        if (end == p || a < 0 || a >= max)
            return -1;
        long b = a;
        p = end;
        if (*p == '-') {
            p++;
            b = strtol(p, &end, 10);
            if (end == p || b < a || b >= max)
                return -1;
            p = end;
        }
        for (long i = a; i <= b; i++)
            set[i] = !neg;
        while (*p == ' ')
            p++;
        if (*p && *p != ',')
            return -1;
    }
    return 0;
}

static xmlDocPtr lv_parse(const char *xml)
{
    if (!xml)
        return NULL;
    /* no XML_PARSE_NOENT: entities are never expanded; no DTD is loaded. libvirt never
     * writes a DOCTYPE, so a document with one (entities, XXE) is refused outright. */
    xmlDocPtr doc = xmlReadMemory(xml, (int)strlen(xml), "domain.xml", NULL, LV_XML_OPTS);
    if (doc && (doc->intSubset || doc->extSubset)) {
        xmlFreeDoc(doc);
        return NULL;
    }
    return doc;
}

static xmlNodePtr lv_child(xmlNodePtr n, const char *name)
{
    for (xmlNodePtr c = n ? n->children : NULL; c; c = c->next) {
        if (c->type == XML_ELEMENT_NODE && xmlStrcmp(c->name, BAD_CAST name) == 0)
            return c;
    }
    return NULL;
}

/* malloc'd attribute value or NULL */
static char *lv_attr(xmlNodePtr n, const char *name)
{
    xmlChar *v = n ? xmlGetProp(n, BAD_CAST name) : NULL;
    if (!v)
        return NULL;
    char *r = strdup((const char *)v);
    xmlFree(v);
    return r;
}

static char *lv_text(xmlNodePtr n)
{
    xmlChar *v = n ? xmlNodeGetContent(n) : NULL;
    if (!v)
        return NULL;
    char *r = strdup((const char *)v);
    xmlFree(v);
    return r;
}

/* an element's size in KiB: text with its unit attribute; -1 when absent or invalid */
static long long lv_size_of(xmlNodePtr n)
{
    if (!n)
        return -1;
    char *t = lv_text(n), *u = lv_attr(n, "unit");
    long long v = lv_xml_to_kib(t, u);
    free(t);
    free(u);
    return v;
}

static int lv_int_attr(xmlNodePtr n, const char *name, int dflt)
{
    char *v = lv_attr(n, name);
    if (!v)
        return dflt;
    char *end;
    long r = strtol(v, &end, 10);
    int ret = (end == v || *end || r < 0 || r > 1000000) ? dflt : (int)r;
    free(v);
    return ret;
}

static int lv_int_text(xmlNodePtr n, int dflt)
{
    char *v = lv_text(n);
    if (!v)
        return dflt;
    char *end;
    long r = strtol(v, &end, 10);
    while (*end == ' ' || *end == '\n' || *end == '\t')
        end++;
    int ret = (end == v || *end || r < 0 || r > 1000000) ? dflt : (int)r;
    free(v);
    return ret;
}

static void lv_parse_memdev(xmlNodePtr n, struct lv_memdev *m)
{
    char *model = lv_attr(n, "model");
    if (model && strcmp(model, "dimm") == 0)
        m->model = LV_MEM_DIMM;
    else if (model && strcmp(model, "virtio-mem") == 0)
        m->model = LV_MEM_VIRTIO_MEM;
    else
        m->model = LV_MEM_OTHER;
    free(model);
    xmlNodePtr t = lv_child(n, "target");
    m->size_kib = lv_size_of(lv_child(t, "size"));
    if (m->size_kib < 0)
        m->size_kib = 0;
    m->node = lv_int_text(lv_child(t, "node"), -1);
    m->requested_kib = -1;
    m->current_kib = -1;
    m->block_kib = -1;
    if (m->model == LV_MEM_VIRTIO_MEM) {
        m->requested_kib = lv_size_of(lv_child(t, "requested"));
        m->current_kib = lv_size_of(lv_child(t, "current"));
        m->block_kib = lv_size_of(lv_child(t, "block"));
    }
}

static void lv_parse_cpu(xmlNodePtr cpu, struct lv_dominfo *o)
{
    xmlNodePtr topo = lv_child(cpu, "topology");
    if (topo) {
        o->sockets = lv_int_attr(topo, "sockets", -1);
        o->dies = lv_int_attr(topo, "dies", 1);
        o->cores = lv_int_attr(topo, "cores", -1);
        o->threads = lv_int_attr(topo, "threads", 1);
    }
    xmlNodePtr numa = lv_child(cpu, "numa");
    for (xmlNodePtr c = numa ? numa->children : NULL; c; c = c->next) {
        if (c->type != XML_ELEMENT_NODE || xmlStrcmp(c->name, BAD_CAST "cell") != 0)
            continue;
        if (o->ncells == LV_MAX_CELLS)
            break;
        struct lv_cell *cell = &o->cells[o->ncells];
        cell->id = lv_int_attr(c, "id", o->ncells);
        char *mem = lv_attr(c, "memory"), *unit = lv_attr(c, "unit");
        cell->mem_kib = lv_xml_to_kib(mem, unit);
        free(mem);
        free(unit);
        if (cell->mem_kib < 0)
            cell->mem_kib = 0;
        o->ncells++;
    }
}

static void lv_parse_devices(xmlNodePtr devs, struct lv_dominfo *o)
{
    for (xmlNodePtr c = devs ? devs->children : NULL; c; c = c->next) {
        if (c->type != XML_ELEMENT_NODE)
            continue;
        if (xmlStrcmp(c->name, BAD_CAST "memory") == 0 && o->nmems < LV_MAX_MEMDEVS) {
            struct lv_memdev *m = &o->mems[o->nmems++];
            lv_parse_memdev(c, m);
            char *model = lv_attr(c, "model");
            if (model && strncmp(model, "virtio", 6) != 0)
                o->slots_used++; /* dimm, nvdimm, ... take a DIMM slot */
            free(model);
        } else if (xmlStrcmp(c->name, BAD_CAST "memballoon") == 0) {
            char *model = lv_attr(c, "model");
            o->balloon = model && strcmp(model, "none") != 0;
            o->balloon_virtio = model && strncmp(model, "virtio", 6) == 0;
            o->balloon_period = lv_int_attr(lv_child(c, "stats"), "period", 0);
            free(model);
        } else if (xmlStrcmp(c->name, BAD_CAST "channel") == 0) {
            xmlNodePtr t = lv_child(c, "target");
            char *name = lv_attr(t, "name"), *state = lv_attr(t, "state");
            if (name && strcmp(name, "org.qemu.guest_agent.0") == 0) {
                o->agent_channel = true;
                o->agent_connected = state && strcmp(state, "connected") == 0;
            }
            free(name);
            free(state);
        }
    }
}

static void lv_derive(struct lv_dominfo *o)
{
    long long devs = 0, vmem_plugged = 0;
    bool has_vmem = false;
    for (int i = 0; i < o->nmems; i++) {
        const struct lv_memdev *m = &o->mems[i];
        if (m->model == LV_MEM_VIRTIO_MEM) {
            has_vmem = true;
            devs += m->size_kib; /* libvirt counts the whole device in <memory> */
            /* only what a guest driver plugged counts: <current> in live XML; a definition
             * (no <current>) guarantees nothing at boot, whatever it requests */
            vmem_plugged += m->current_kib > 0 ? m->current_kib : 0;
        } else {
            devs += m->size_kib;
        }
    }
    if (o->ncells > 0) {
        o->initial_kib = 0;
        for (int i = 0; i < o->ncells; i++)
            o->initial_kib += o->cells[i].mem_kib;
    } else {
        o->initial_kib = o->memory_kib - devs;
        if (o->initial_kib < 0)
            o->initial_kib = 0;
    }
    long long dimms = 0;
    for (int i = 0; i < o->nmems; i++) {
        if (o->mems[i].model != LV_MEM_VIRTIO_MEM)
            dimms += o->mems[i].size_kib;
    }
    o->plugged_kib = o->initial_kib + dimms + vmem_plugged;
    o->effective_kib = o->plugged_kib;
    /* The balloon: libvirt's <currentMemory> counts DIMMs (it grows on hot-add) but how it
     * accounts virtio-mem varies, so only domains without virtio-mem are capped by it. */
    if (!has_vmem && o->current_kib >= 0 && o->current_kib < o->effective_kib)
        o->effective_kib = o->current_kib;
}

int lv_xml_parse_domain(const char *xml, struct lv_dominfo *o, char *why, size_t whylen)
{
    memset(o, 0, sizeof(*o));
    o->max_kib = -1;
    o->slots = -1;
    o->sockets = o->dies = o->cores = o->threads = -1;
    o->current_kib = -1;
    xmlDocPtr doc = lv_parse(xml);
    if (!doc) {
        lv_why(why, whylen, "domain XML does not parse");
        return -1;
    }
    int rc = -1;
    xmlNodePtr root = xmlDocGetRootElement(doc);
    if (!root || xmlStrcmp(root->name, BAD_CAST "domain") != 0) {
        lv_why(why, whylen, "not a <domain> document");
        goto out;
    }
    o->memory_kib = lv_size_of(lv_child(root, "memory"));
    if (o->memory_kib < 0) {
        lv_why(why, whylen, "domain XML has no valid <memory>");
        goto out;
    }
    o->current_kib = lv_size_of(lv_child(root, "currentMemory"));
    if (o->current_kib < 0)
        o->current_kib = o->memory_kib;
    xmlNodePtr maxm = lv_child(root, "maxMemory");
    if (maxm) {
        o->max_kib = lv_size_of(maxm);
        o->slots = lv_int_attr(maxm, "slots", 0);
    }
    xmlNodePtr vcpu = lv_child(root, "vcpu");
    o->vcpu_max = lv_int_text(vcpu, 1);
    o->vcpu_current = lv_int_attr(vcpu, "current", o->vcpu_max);
    xmlNodePtr feat = lv_child(root, "features");
    o->acpi = lv_child(feat, "acpi") != NULL;
    lv_parse_cpu(lv_child(root, "cpu"), o);
    lv_parse_devices(lv_child(root, "devices"), o);
    lv_derive(o);
    rc = 0;
out:
    xmlFreeDoc(doc);
    return rc;
}

int lv_xml_disk(const char *xml, const char *target, struct lv_disk *out)
{
    memset(out, 0, sizeof(*out));
    out->capacity = -1;
    xmlDocPtr doc = lv_parse(xml);
    if (!doc)
        return -1;
    xmlNodePtr root = xmlDocGetRootElement(doc);
    xmlNodePtr devs = root ? lv_child(root, "devices") : NULL;
    for (xmlNodePtr c = devs ? devs->children : NULL; c && !out->found; c = c->next) {
        if (c->type != XML_ELEMENT_NODE || xmlStrcmp(c->name, BAD_CAST "disk") != 0)
            continue;
        char *dev = lv_attr(lv_child(c, "target"), "dev");
        bool match = dev && strcmp(dev, target) == 0;
        free(dev);
        if (!match)
            continue;
        out->found = true;
        char *type = lv_attr(c, "type"), *device = lv_attr(c, "device");
        snprintf(out->type, sizeof(out->type), "%s", type ? type : "file");
        snprintf(out->device, sizeof(out->device), "%s", device ? device : "disk");
        free(type);
        free(device);
        xmlNodePtr src = lv_child(c, "source");
        char *file = lv_attr(src, "file"), *bdev = lv_attr(src, "dev");
        char *pool = lv_attr(src, "pool"), *vol = lv_attr(src, "volume");
        snprintf(out->source, sizeof(out->source), "%s", file ? file : bdev ? bdev : "");
        snprintf(out->pool, sizeof(out->pool), "%s", pool ? pool : "");
        snprintf(out->volume, sizeof(out->volume), "%s", vol ? vol : "");
        free(file);
        free(bdev);
        free(pool);
        free(vol);
        out->readonly = lv_child(c, "readonly") != NULL;
    }
    xmlFreeDoc(doc);
    return 0;
}

char *lv_xml_element_text(const char *xml)
{
    xmlDocPtr doc = lv_parse(xml);
    if (!doc)
        return NULL;
    char *r = lv_text(xmlDocGetRootElement(doc));
    xmlFreeDoc(doc);
    return r;
}

char *lv_xml_record_element(const char *text)
{
    /* Escape by hand so the text survives exactly: &, <, > and CR, which an XML parser
     * would otherwise normalise to LF (tab and LF are kept as they are in content). */
    size_t n = strlen(text), cap = n * 6 + 64;
    char *out = malloc(cap);
    if (!out)
        return NULL;
    size_t o = (size_t)snprintf(out, cap, "<%s>", LV_RECORD_ELEM);
    for (const char *p = text; *p; p++) {
        const char *rep = NULL;
        switch (*p) {
        case '&':
            rep = "&amp;";
            break;
        case '<':
            rep = "&lt;";
            break;
        case '>':
            rep = "&gt;";
            break;
        case '\r':
            rep = "&#13;";
            break;
        default:
            break;
        }
        if (rep) {
            size_t l = strlen(rep);
            memcpy(out + o, rep, l);
            o += l;
        } else {
            out[o++] = *p;
        }
    }
    snprintf(out + o, cap - o, "</%s>", LV_RECORD_ELEM);
    return out;
}

static void lv_addr_key(xmlNodePtr dev, char *out, size_t len)
{
    xmlNodePtr a = lv_child(dev, "address");
    char *dom = lv_attr(a, "domain"), *bus = lv_attr(a, "bus"), *slot = lv_attr(a, "slot"),
         *fn = lv_attr(a, "function");
    if (bus && slot)
        snprintf(out, len, "%s:%s:%s.%s", dom ? dom : "0", bus, slot, fn ? fn : "0");
    else if (len)
        out[0] = '\0';
    free(dom);
    free(bus);
    free(slot);
    free(fn);
}

static char *lv_node_dump(xmlDocPtr doc, xmlNodePtr n)
{
    xmlBufferPtr buf = xmlBufferCreate();
    if (!buf)
        return NULL;
    char *r = NULL;
    if (xmlNodeDump(buf, doc, n, 0, 0) >= 0)
        r = strdup((const char *)xmlBufferContent(buf));
    xmlBufferFree(buf);
    return r;
}

char *lv_xml_vmem_device(const char *domxml, int index, const char *addr, long long requested_kib,
                         char *addr_out, size_t addr_len)
{
    if (addr_out && addr_len)
        addr_out[0] = '\0';
    xmlDocPtr doc = lv_parse(domxml);
    if (!doc)
        return NULL;
    xmlNodePtr devs = lv_child(xmlDocGetRootElement(doc), "devices");
    xmlNodePtr pick = NULL, nth = NULL;
    int i = 0;
    for (xmlNodePtr c = devs ? devs->children : NULL; c; c = c->next) {
        if (c->type != XML_ELEMENT_NODE || xmlStrcmp(c->name, BAD_CAST "memory") != 0)
            continue;
        char *model = lv_attr(c, "model");
        bool vmem = model && strcmp(model, "virtio-mem") == 0;
        free(model);
        if (vmem && i == index)
            nth = c;
        i++;
        if (vmem && addr && addr[0]) {
            char key[128];
            lv_addr_key(c, key, sizeof(key));
            if (strcmp(key, addr) == 0) {
                pick = c;
                break;
            }
        }
    }
    if (!pick)
        pick = nth;
    char *r = NULL;
    xmlNodePtr t = lv_child(pick, "target");
    if (t) {
        xmlNodePtr cur = lv_child(t, "current");
        if (cur) {
            xmlUnlinkNode(cur);
            xmlFreeNode(cur);
        }
        xmlNodePtr req = lv_child(t, "requested");
        if (!req)
            req = xmlNewChild(t, NULL, BAD_CAST "requested", NULL);
        char num[32];
        snprintf(num, sizeof(num), "%lld", requested_kib);
        if (req) {
            xmlNodeSetContent(req, BAD_CAST num);
            xmlSetProp(req, BAD_CAST "unit", BAD_CAST "KiB");
            if (addr_out)
                lv_addr_key(pick, addr_out, addr_len);
            r = lv_node_dump(doc, pick);
        }
    }
    xmlFreeDoc(doc);
    return r;
}
