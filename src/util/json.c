/* json.c: parse (yajl event parser), build, compare and print owning JSON trees.
 *
 * The parser never recurses (an explicit stack capped at HJ_MAX_DEPTH); freeing and printing
 * recurse at most HJ_MAX_DEPTH deep for parsed trees. Every node has one owner: its parent.
 */
#include "json.h"
#include "msg.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_gen.h>
#include <yajl/yajl_parse.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

static void *xcalloc(size_t n, size_t sz)
{
    void *p = calloc(n, sz);
    if (!p)
        abort(); /* out of memory: nothing sensible is left to do */
    return p;
}

static void *xrealloc(void *p, size_t sz)
{
    void *q = realloc(p, sz);
    if (!q)
        abort();
    return q;
}

static char *xstrndup(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (!d)
        abort();
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

/* ---- request arenas ------------------------------------------------------------------------
 * While a thread has an arena open, every node it makes, with its string, keys and item
 * arrays, is carved out of the arena's blocks, and hj_free of such a node frees nothing of
 * it: hj_arena_end releases everything at once. A hook call builds and drops a few hundred
 * nodes; with malloc that was about 40% of the server's time (see docs/operations.md). */

struct hj_block {
    struct hj_block *next;
    size_t cap, used;
    max_align_t data[];
};

static _Thread_local struct hj_arena *cur_arena;

#define ARENA_FIRST_BLOCK (32u << 10)
#define ARENA_MAX_BLOCK   (1u << 20)

/* A new block for n more bytes (rounded), made the head. */
static __attribute__((noinline)) struct hj_block *arena_grow(struct hj_arena *a, size_t n)
{
    size_t cap = a->head ? a->head->cap * 2 : ARENA_FIRST_BLOCK;
    if (cap > ARENA_MAX_BLOCK)
        cap = ARENA_MAX_BLOCK;
    if (cap < n)
        cap = n;
    struct hj_block *b = malloc(sizeof(*b) + cap);
    if (!b)
        abort();
    b->cap = cap;
    b->used = 0;
    b->next = a->head;
    a->head = b;
    a->bytes += cap;
    return b;
}

static inline void *arena_alloc(struct hj_arena *a, size_t n)
{
    n = (n + sizeof(max_align_t) - 1) / sizeof(max_align_t) * sizeof(max_align_t);
    struct hj_block *b = a->head;
    if (__builtin_expect(!b || b->cap - b->used < n, 0))
        b = arena_grow(a, n);
    void *p = (char *)b->data + b->used;
    b->used += n;
    return p;
}

void hj_arena_begin(struct hj_arena *a)
{
    memset(a, 0, sizeof(*a));
    cur_arena = a;
}

void hj_arena_end(struct hj_arena *a)
{
    if (cur_arena == a)
        cur_arena = NULL;
    for (struct hj_block *b = a->head, *next; b; b = next) {
        next = b->next;
        free(b);
    }
    a->head = NULL;
}

/* Memory for a part of v (string, key, item array): from v's arena if it has one. */
static void *part_alloc(const hj *v, size_t n)
{
    if (v->arena) {
        return arena_alloc(v->arena, n);
    }
    void *p = malloc(n);
    if (!p)
        abort();
    return p;
}

static char *part_strndup(const hj *v, const char *s, size_t n)
{
    char *d = part_alloc(v, n + 1);
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

static void part_free(const hj *v, void *p)
{
    if (!v->arena)
        free(p);
}

static hj *node(enum hj_type t)
{
    hj *v;
    if (cur_arena) {
        v = arena_alloc(cur_arena, sizeof(*v));
        memset(v, 0, sizeof(*v));
        v->arena = cur_arena;
    } else {
        v = xcalloc(1, sizeof(*v));
    }
    v->type = t;
    return v;
}

hj *hj_new_null(void)
{
    return node(HJ_NULL);
}

hj *hj_new_bool(bool b)
{
    hj *v = node(HJ_BOOL);
    v->b = b;
    return v;
}

hj *hj_new_int(int64_t i)
{
    char buf[32];
    int n = snprintf(buf, sizeof(buf), "%lld", (long long)i);
    hj *v = node(HJ_INT);
    v->i = i;
    v->f = (double)i;
    v->s = part_strndup(v, buf, (size_t)n);
    v->slen = (size_t)n;
    return v;
}

hj *hj_new_stringn(const char *s, size_t n)
{
    hj *v = node(HJ_STRING);
    v->s = part_strndup(v, s, n);
    v->slen = n;
    return v;
}

hj *hj_new_string(const char *s)
{
    return hj_new_stringn(s, strlen(s));
}

size_t hj_text_len(const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t lead = n;
    /* back over at most three continuation bytes to the sequence's lead byte */
    while (lead > 0 && n - lead < 4 && (u[lead - 1] & 0xc0) == 0x80)
        lead--;
    if (lead == 0 || n - lead >= 4 || u[lead - 1] < 0xc0)
        return n; /* ASCII last, or not a sequence a cut made: left as it is */
    unsigned char c = u[lead - 1];
    if (c >= 0xf8)
        return n; /* no lead byte of UTF-8: no cut made it */
    size_t want = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2;
    return n - (lead - 1) < want ? lead - 1 : n;
}

hj *hj_new_text(const char *s)
{
    return hj_new_stringn(s, hj_text_len(s, strlen(s)));
}

void hj_text_cut(char *s)
{
    s[hj_text_len(s, strlen(s))] = '\0';
}

void hj_text_copy(char *dst, size_t cap, const char *src)
{
    snprintf(dst, cap, "%s", src);
    hj_text_cut(dst);
}

hj *hj_new_array(void)
{
    return node(HJ_ARRAY);
}

hj *hj_new_object(void)
{
    return node(HJ_OBJECT);
}

static hj *number_from_text(const char *t, size_t n)
{
    char buf[64];
    hj *v;
    if (!memchr(t, '.', n) && !memchr(t, 'e', n) && !memchr(t, 'E', n) && n < sizeof(buf)) {
        memcpy(buf, t, n);
        buf[n] = '\0';
        errno = 0;
        long long ll = strtoll(buf, NULL, 10);
        if (errno == 0) {
            v = node(HJ_INT);
            v->i = ll;
            v->f = (double)ll;
            v->s = part_strndup(v, t, n);
            v->slen = n;
            return v;
        }
    }
    /* Non-integers and integers beyond int64 are floats, as in Kubernetes unstructured. */
    v = node(HJ_FLOAT);
    v->s = part_strndup(v, t, n);
    v->slen = n;
    v->f = strtod(v->s, NULL);
    return v;
}

void hj_free(hj *v)
{
    if (!v)
        return;
    if (v->arena) {
        /* Its memory goes with the arena; only heap-made children are freed here. */
        for (size_t k = 0; k < v->n; k++)
            if (!v->items[k]->arena)
                hj_free(v->items[k]);
        return;
    }
    for (size_t k = 0; k < v->n; k++) {
        hj_free(v->items[k]);
        if (v->keys)
            free(v->keys[k]);
    }
    free(v->items);
    free(v->keys);
    free(v->klens);
    free(v->s);
    free(v);
}

static void grow(hj *c)
{
    if (c->n < c->cap)
        return;
    size_t cap = c->cap ? c->cap * 2 : 4;
    if (c->arena) {
        hj **items = arena_alloc(c->arena, cap * sizeof(*items));
        if (c->n)
            memcpy(items, c->items, c->n * sizeof(*items));
        c->items = items;
        if (c->type == HJ_OBJECT) {
            char **keys = arena_alloc(c->arena, cap * sizeof(*keys));
            size_t *klens = arena_alloc(c->arena, cap * sizeof(*klens));
            if (c->n) {
                memcpy(keys, c->keys, c->n * sizeof(*keys));
                memcpy(klens, c->klens, c->n * sizeof(*klens));
            }
            c->keys = keys;
            c->klens = klens;
        }
    } else {
        c->items = xrealloc(c->items, cap * sizeof(*c->items));
        if (c->type == HJ_OBJECT) {
            c->keys = xrealloc(c->keys, cap * sizeof(*c->keys));
            c->klens = xrealloc(c->klens, cap * sizeof(*c->klens));
        }
    }
    c->cap = cap;
}

/* A heap-made parent must not hold arena-made values: they would dangle once the arena ends. */
static void check_owner(const hj *parent, const hj *val)
{
    if (val && val->arena && val->arena != parent->arena) {
        fprintf(stderr, "hvupdater: internal error: an arena JSON value put into a longer-lived "
                        "tree\n");
        abort();
    }
}

static ssize_t obj_index(const hj *obj, const char *key, size_t klen)
{
    /* Lengths first: most keys of an object differ in length, and those that do not
     * mostly differ in their first byte, so memcmp rarely runs. */
    for (size_t k = 0; k < obj->n; k++)
        if (obj->klens[k] == klen && obj->keys[k][0] == key[0] &&
            memcmp(obj->keys[k], key, klen) == 0)
            return (ssize_t)k;
    return -1;
}

/* Set obj[key] = val; key (klen bytes) is copied unless owned_key, which obj then owns. */
static void obj_set_key(hj *obj, const char *key, size_t klen, char *owned_key, hj *val)
{
    check_owner(obj, val);
    ssize_t at = obj_index(obj, key, klen);
    if (at >= 0) { /* duplicate keys: the last one wins, as in Go's decoder */
        hj_free(obj->items[at]);
        obj->items[at] = val;
        if (owned_key)
            part_free(obj, owned_key);
        return;
    }
    grow(obj);
    obj->keys[obj->n] = owned_key ? owned_key : part_strndup(obj, key, klen);
    obj->klens[obj->n] = klen;
    obj->items[obj->n++] = val;
}

static void obj_set_n(hj *obj, const char *key, size_t klen, hj *val)
{
    obj_set_key(obj, key, klen, NULL, val);
}

void hj_obj_set_take(hj *obj, const char *key, hj *val)
{
    obj_set_n(obj, key, strlen(key), val);
}

void hj_arr_push_take(hj *arr, hj *val)
{
    check_owner(arr, val);
    grow(arr);
    arr->items[arr->n++] = val;
}

bool hj_obj_del(hj *obj, const char *key)
{
    if (!obj || obj->type != HJ_OBJECT)
        return false;
    ssize_t at = obj_index(obj, key, strlen(key));
    if (at < 0)
        return false;
    hj_free(obj->items[at]);
    part_free(obj, obj->keys[at]);
    memmove(&obj->items[at], &obj->items[at + 1], (obj->n - (size_t)at - 1) * sizeof(hj *));
    memmove(&obj->keys[at], &obj->keys[at + 1], (obj->n - (size_t)at - 1) * sizeof(char *));
    memmove(&obj->klens[at], &obj->klens[at + 1], (obj->n - (size_t)at - 1) * sizeof(size_t));
    obj->n--;
    return true;
}

hj *hj_clone(const hj *v)
{
    if (!v)
        return NULL;
    hj *c = node(v->type);
    c->b = v->b;
    c->i = v->i;
    c->f = v->f;
    if (v->s) {
        c->s = part_strndup(c, v->s, v->slen);
        c->slen = v->slen;
    }
    for (size_t k = 0; k < v->n; k++) {
        if (v->type == HJ_OBJECT)
            obj_set_n(c, v->keys[k], v->klens[k], hj_clone(v->items[k]));
        else
            hj_arr_push_take(c, hj_clone(v->items[k]));
    }
    return c;
}

/* ---- parsing --------------------------------------------------------------------------- */

/* While parsing, the members of every open container wait in one scratch list (ents); when
 * the container closes they move into arrays of exactly their size. One pending key at a
 * time is enough: a key is always followed by its value, which takes it. */
struct pentry {
    char *key; /* NULL in arrays */
    size_t klen;
    hj *val;
};

#define PARSE_INLINE_ENTS 256

struct pstate {
    hj *root;
    hj *stack[HJ_MAX_DEPTH + 1];
    size_t start[HJ_MAX_DEPTH + 1];  /* first entry of each open container */
    uint64_t seen[HJ_MAX_DEPTH + 1]; /* each open object's keys so far, one bit per key_bit */
    int depth;
    struct hj_arena *arena; /* where this parse makes its values (NULL: the heap) */
    char *key;              /* pending key of the innermost open object */
    size_t klen;
    struct pentry *ents;
    size_t n_ents, cap_ents;
    struct pentry inline_ents[PARSE_INLINE_ENTS];
    size_t nodes, node_budget; /* values made so far, and how many this input may make */
    const char *why;           /* our own reason for cancelling */
};

static void pkey_free(struct pstate *p, char *key)
{
    if (key && !p->arena)
        free(key);
}

static __attribute__((noinline)) void ents_grow(struct pstate *p)
{
    size_t cap = p->cap_ents * 2;
    struct pentry *e;
    if (p->ents == p->inline_ents) {
        e = malloc(cap * sizeof(*e));
        if (!e)
            abort();
        memcpy(e, p->ents, p->n_ents * sizeof(*e));
    } else {
        e = xrealloc(p->ents, cap * sizeof(*e));
    }
    p->ents = e;
    p->cap_ents = cap;
}

static inline void ents_push(struct pstate *p, char *key, size_t klen, hj *v)
{
    if (__builtin_expect(p->n_ents == p->cap_ents, 0))
        ents_grow(p);
    p->ents[p->n_ents++] = (struct pentry){key, klen, v};
}

/* One of 64 bits for a key, from its length and three of its bytes. */
static inline uint64_t key_bit(const char *key, size_t klen)
{
    unsigned h = (unsigned)klen * 7u;
    if (klen)
        h += (unsigned char)key[0] * 3u + (unsigned char)key[klen - 1] * 5u +
             (unsigned char)key[klen / 2];
    return (uint64_t)1 << (h & 63);
}

static int add_value(struct pstate *p, hj *v)
{
    /* Every value (containers too) passes here: the node budget bounds the tree, so parsing
     * memory is a small multiple of the input's bytes whatever its shape (hj_node_budget). */
    if (++p->nodes > p->node_budget) {
        hj_free(v);
        p->why = HV_MSG("more values than the input's size allows (one per 8 bytes)");
        return 0;
    }
    if (p->depth == 0) {
        if (p->root) {
            hj_free(v);
            p->why = "more than one JSON value";
            return 0;
        }
        p->root = v;
        return 1;
    }
    hj *parent = p->stack[p->depth - 1];
    if (parent->type == HJ_ARRAY) {
        ents_push(p, NULL, 0, v);
        return 1;
    }
    char *key = p->key;
    size_t klen = p->klen;
    p->key = NULL;
    /* duplicate keys: the last value wins, in the first one's place, as in Go's decoder (a key
     * whose bit is not set yet is no duplicate: most keys skip the search) */
    uint64_t bit = key_bit(key, klen);
    uint64_t *seen = &p->seen[p->depth - 1];
    if (!(*seen & bit)) {
        *seen |= bit;
        ents_push(p, key, klen, v);
        return 1;
    }
    for (size_t k = p->start[p->depth - 1]; k < p->n_ents; k++) {
        struct pentry *e = &p->ents[k];
        if (e->klen == klen && memcmp(e->key, key, klen) == 0) {
            hj_free(e->val);
            e->val = v;
            pkey_free(p, key);
            return 1;
        }
    }
    ents_push(p, key, klen, v);
    return 1;
}

static int push(struct pstate *p, hj *v)
{
    if (p->depth >= HJ_MAX_DEPTH) {
        hj_free(v);
        p->why = "nesting deeper than 64 levels";
        return 0;
    }
    if (!add_value(p, v))
        return 0;
    p->stack[p->depth] = v;
    p->start[p->depth] = p->n_ents;
    p->seen[p->depth] = 0;
    p->depth++;
    return 1;
}

static int cb_null(void *ctx)
{
    return add_value(ctx, hj_new_null());
}

static int cb_bool(void *ctx, int b)
{
    return add_value(ctx, hj_new_bool(b != 0));
}

static int cb_number(void *ctx, const char *s, size_t n)
{
    return add_value(ctx, number_from_text(s, n));
}

static int cb_string(void *ctx, const unsigned char *s, size_t n)
{
    return add_value(ctx, hj_new_stringn((const char *)s, n));
}

static int cb_start_map(void *ctx)
{
    return push(ctx, hj_new_object());
}

/* A key; may_nul false when s cannot hold a NUL (the fast path's keys without escapes). */
static int key_add(struct pstate *p, const unsigned char *s, size_t n, bool may_nul)
{
    if (p->n_ents - p->start[p->depth - 1] >= HJ_MAX_MEMBERS) {
        p->why = HV_MSG("an object with more than 4096 members");
        return 0;
    }
    /* keys are C strings here: "a\u0000b" would read as "a" */
    if (may_nul && memchr(s, '\0', n)) {
        p->why = HV_MSG("object key contains U+0000");
        return 0;
    }
    pkey_free(p, p->key);
    p->key = part_strndup(p->stack[p->depth - 1], (const char *)s, n);
    p->klen = n;
    return 1;
}

static int cb_key(void *ctx, const unsigned char *s, size_t n)
{
    return key_add(ctx, s, n, true);
}

/* The innermost container closes: its members move into arrays of their exact size. */
static int cb_end(void *ctx)
{
    struct pstate *p = ctx;
    hj *c = p->stack[p->depth - 1];
    size_t first = p->start[p->depth - 1], n = p->n_ents - first;
    if (n && c->arena) { /* one piece of the arena for the three arrays */
        bool obj = c->type == HJ_OBJECT;
        char *m = arena_alloc(
            c->arena, n * (sizeof(*c->items) + (obj ? sizeof(*c->keys) + sizeof(*c->klens) : 0)));
        c->items = (hj **)(void *)m;
        if (obj) {
            c->keys = (char **)(void *)(m + n * sizeof(*c->items));
            c->klens = (size_t *)(void *)(m + n * (sizeof(*c->items) + sizeof(*c->keys)));
        }
    } else if (n) {
        c->items = part_alloc(c, n * sizeof(*c->items));
        if (c->type == HJ_OBJECT) {
            c->keys = part_alloc(c, n * sizeof(*c->keys));
            c->klens = part_alloc(c, n * sizeof(*c->klens));
        }
    }
    if (n) {
        for (size_t k = 0; k < n; k++) {
            const struct pentry *e = &p->ents[first + k];
            c->items[k] = e->val;
            if (c->type == HJ_OBJECT) {
                c->keys[k] = e->key;
                c->klens[k] = e->klen;
            }
        }
        c->n = c->cap = n;
    }
    p->n_ents = first;
    p->depth--;
    return 1;
}

static int cb_start_array(void *ctx)
{
    return push(ctx, hj_new_array());
}

static const yajl_callbacks callbacks = {
    .yajl_null = cb_null,
    .yajl_boolean = cb_bool,
    .yajl_number = cb_number,
    .yajl_string = cb_string,
    .yajl_start_map = cb_start_map,
    .yajl_map_key = cb_key,
    .yajl_end_map = cb_end,
    .yajl_start_array = cb_start_array,
    .yajl_end_array = cb_end,
};

/* yajl's non-verbose error text, first line, without its "parse error: " style prefix. */
static void yajl_reason(yajl_handle h, const char *buf, size_t len, char *out, size_t outlen)
{
    unsigned char *e = yajl_get_error(h, 0, (const unsigned char *)buf, len);
    const char *t = e ? (const char *)e : HV_MSG("malformed input");
    const char *colon = strstr(t, ": ");
    if (colon && colon - t < 20)
        t = colon + 2;
    size_t n = strcspn(t, "\n");
    if (n >= outlen)
        n = outlen - 1;
    memcpy(out, t, n);
    out[n] = '\0';
    if (n && out[n - 1] == '.')
        out[n - 1] = '\0';
    if (e)
        yajl_free_error(h, e);
}

size_t hj_node_budget(size_t len)
{
    return len / HJ_BYTES_PER_NODE + HJ_NODE_SLACK;
}

static void pstate_init(struct pstate *p, size_t len)
{
    p->root = NULL;
    p->depth = 0;
    p->arena = cur_arena;
    p->key = NULL;
    p->klen = 0;
    p->ents = p->inline_ents;
    p->n_ents = 0;
    p->cap_ents = PARSE_INLINE_ENTS;
    p->why = NULL;
    p->nodes = 0;
    p->node_budget = hj_node_budget(len);
}

/* Drop what a parse that did not finish has built. Members of still-open containers are only
 * in ents; open containers hold none. */
static void pstate_discard(struct pstate *p)
{
    for (size_t k = 0; k < p->n_ents; k++) {
        pkey_free(p, p->ents[k].key);
        hj_free(p->ents[k].val);
    }
    pkey_free(p, p->key);
    hj_free(p->root);
    if (p->ents != p->inline_ents)
        free(p->ents);
}

/* ---- the fast path --------------------------------------------------------------------------
 * yajl's lexer and parser cost about 20 instructions per byte of a hook request, more than
 * building the tree. fast_parse reads the common case itself, in one pass, and drives the
 * same callbacks yajl would, with the same arguments in the same order, so the tree is the
 * same. It accepts only what yajl accepts: anything else (an error, whitespace yajl takes
 * beyond the usual four, a \u escape of a surrogate, a callback's refusal such as the node
 * budget) makes it give up, and hj_parse then parses the input again with yajl, which gives
 * the answer, or the error message, it always gave. What the fast path built is dropped first
 * (in an arena: the arena is wound back). */

/* fast_class: 1 (FC_PLAIN) for a byte that stands for itself in a string (printable ASCII but
 * '"' and '\\'), 2 (FC_WS) for the whitespace the fast path skips (space, tab, LF, CR). */
enum { FC_PLAIN = 1, FC_WS = 2 };
/* clang-format off */
static const unsigned char fast_class[256] = {
    0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 2, 0, 0, 2, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    3, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
};
/* clang-format on */

/* yajl's check of a UTF-8 sequence in a string (yajl_lex_utf8_char): the length its lead
 * byte announces, with continuation bytes only; overlong forms and surrogates pass, as there.
 * Returns the bytes it takes, 0 when yajl refuses it. */
static size_t fast_utf8(const unsigned char *s, const unsigned char *end)
{
    unsigned char c = s[0];
    size_t n;
    if ((c >> 5) == 0x6)
        n = 2;
    else if ((c >> 4) == 0x0e)
        n = 3;
    else if ((c >> 3) == 0x1e)
        n = 4;
    else
        return 0;
    if ((size_t)(end - s) < n)
        return 0;
    for (size_t k = 1; k < n; k++)
        if ((s[k] >> 6) != 0x2)
            return 0;
    return n;
}

static int hexval(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Past the bytes at s that stand for themselves in a string (fast_class FC_PLAIN). */
static inline const unsigned char *fast_plain(const unsigned char *s, const unsigned char *end)
{
#ifdef __SSE2__
    /* 16 at a time: a signed compare below 0x20 finds control characters and every byte from
     * 0x80 up at once */
    const __m128i quote = _mm_set1_epi8('"'), bslash = _mm_set1_epi8('\\'),
                  space = _mm_set1_epi8(0x20);
    while (end - s >= 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)s);
        __m128i stop =
            _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, bslash)),
                         _mm_cmplt_epi8(v, space));
        unsigned m = (unsigned)_mm_movemask_epi8(stop);
        if (m)
            return s + __builtin_ctz(m);
        s += 16;
    }
#endif
    while (s < end && (fast_class[*s] & FC_PLAIN))
        s++;
    return s;
}

/* Decoded text of strings with escapes: big enough for the rest of the input at the first
 * such string (a decoded string is never longer than its source). */
struct fast_buf {
    char *d;
    size_t cap;
    char inline_d[512];
};

/* A string at s (just past its opening quote): its text (in place when it has no escapes,
 * else decoded into b) in *out / *outlen, and where it ends (past the closing quote); NULL
 * when the fast path gives up. */
static const unsigned char *fast_string(const unsigned char *s, const unsigned char *end,
                                        struct fast_buf *b, const char **out, size_t *outlen)
{
    const unsigned char *start = s;
    for (;;) {
        s = fast_plain(s, end);
        if (s == end)
            return NULL;
        if (*s == '"') {
            *out = (const char *)start;
            *outlen = (size_t)(s - start);
            return s + 1;
        }
        if (*s == '\\')
            break;
        size_t n = *s >= 0x80 ? fast_utf8(s, end) : 0; /* else a control character */
        if (!n)
            return NULL;
        s += n;
    }
    /* escapes: decode as yajl_string_decode does */
    if (b->cap < (size_t)(end - start)) {
        char *d = b->d == b->inline_d ? malloc((size_t)(end - start))
                                      : realloc(b->d, (size_t)(end - start));
        if (!d)
            abort();
        b->d = d;
        b->cap = (size_t)(end - start);
    }
    char *o = b->d;
    const unsigned char *run = start;
    for (;;) {
        s = fast_plain(s, end);
        if (s == end)
            return NULL;
        if (*s == '"') {
            memcpy(o, run, (size_t)(s - run));
            o += s - run;
            *out = b->d;
            *outlen = (size_t)(o - b->d);
            return s + 1;
        }
        if (*s != '\\') {
            size_t n = *s >= 0x80 ? fast_utf8(s, end) : 0;
            if (!n)
                return NULL;
            s += n;
            continue;
        }
        memcpy(o, run, (size_t)(s - run));
        o += s - run;
        if (end - s < 2)
            return NULL;
        switch (s[1]) {
        case '"':
        case '\\':
        case '/':
            *o++ = (char)s[1];
            break;
        case 'b':
            *o++ = '\b';
            break;
        case 'f':
            *o++ = '\f';
            break;
        case 'n':
            *o++ = '\n';
            break;
        case 'r':
            *o++ = '\r';
            break;
        case 't':
            *o++ = '\t';
            break;
        case 'u': {
            if (end - s < 6)
                return NULL;
            unsigned cp = 0;
            for (int k = 2; k < 6; k++) {
                int h = hexval(s[k]);
                if (h < 0)
                    return NULL;
                cp = cp << 4 | (unsigned)h;
            }
            if (cp >= 0xD800 && cp <= 0xDFFF)
                return NULL; /* surrogates: yajl's own rules */
            /* at most 3 bytes for the 6 of the escape */
            if (cp < 0x80) {
                *o++ = (char)cp; /* \u0000 too: one NUL byte, as in yajl */
            } else if (cp < 0x800) {
                *o++ = (char)(cp >> 6 | 0xC0);
                *o++ = (char)((cp & 0x3F) | 0x80);
            } else {
                *o++ = (char)(cp >> 12 | 0xE0);
                *o++ = (char)((cp >> 6 & 0x3F) | 0x80);
                *o++ = (char)((cp & 0x3F) | 0x80);
            }
            s += 6;
            run = s;
            continue;
        }
        default:
            return NULL;
        }
        s += 2;
        run = s;
    }
}

/* A number at s as yajl lexes it; where it ends, NULL when it is not one. */
static const unsigned char *fast_number(const unsigned char *s, const unsigned char *end)
{
    if (s < end && *s == '-')
        s++;
    if (s == end)
        return NULL;
    if (*s == '0') {
        s++;
    } else if (*s >= '1' && *s <= '9') {
        while (s < end && *s >= '0' && *s <= '9')
            s++;
    } else {
        return NULL;
    }
    if (s < end && *s == '.') {
        s++;
        const unsigned char *d = s;
        while (s < end && *s >= '0' && *s <= '9')
            s++;
        if (s == d)
            return NULL;
    }
    if (s < end && (*s == 'e' || *s == 'E')) {
        s++;
        if (s < end && (*s == '+' || *s == '-'))
            s++;
        const unsigned char *d = s;
        while (s < end && *s >= '0' && *s <= '9')
            s++;
        if (s == d)
            return NULL;
    }
    return s;
}

#define FAST_WS(s, end)                                                                            \
    while ((s) < (end) && (fast_class[*(s)] & FC_WS))                                              \
    (s)++

/* 1: parsed, p->root is the document; 0: given up (p holds what was built so far). */
static int fast_parse(struct pstate *p, const char *text, size_t len)
{
    if (!len) /* (nothing to read: yajl's message; and text may be NULL) */
        return 0;
    const unsigned char *s = (const unsigned char *)text, *end = s + len;
    struct fast_buf b;
    b.d = b.inline_d;
    b.cap = sizeof(b.inline_d);
    int ok = 0;
    FAST_WS(s, end);
    if (s == end)
        goto out;
value:
    if (s == end)
        goto out;
    switch (*s) {
    case '{':
        if (!cb_start_map(p))
            goto out;
        s++;
        FAST_WS(s, end);
        if (s < end && *s == '}') {
            cb_end(p);
            s++;
            goto after;
        }
        goto key;
    case '[':
        if (!cb_start_array(p))
            goto out;
        s++;
        FAST_WS(s, end);
        if (s < end && *s == ']') {
            cb_end(p);
            s++;
            goto after;
        }
        goto value;
    case '"': {
        const char *str;
        size_t n;
        s = fast_string(s + 1, end, &b, &str, &n);
        if (!s || !cb_string(p, (const unsigned char *)str, n))
            goto out;
        goto after;
    }
    case 't':
        if (end - s < 4 || memcmp(s, "true", 4))
            goto out;
        if (!cb_bool(p, 1))
            goto out;
        s += 4;
        goto after;
    case 'f':
        if (end - s < 5 || memcmp(s, "false", 5))
            goto out;
        if (!cb_bool(p, 0))
            goto out;
        s += 5;
        goto after;
    case 'n':
        if (end - s < 4 || memcmp(s, "null", 4))
            goto out;
        if (!cb_null(p))
            goto out;
        s += 4;
        goto after;
    default: {
        const unsigned char *e = fast_number(s, end);
        if (!e || !cb_number(p, (const char *)s, (size_t)(e - s)))
            goto out;
        s = e;
        goto after;
    }
    }
key:
    if (s == end || *s != '"')
        goto out;
    {
        const char *str;
        size_t n;
        s = fast_string(s + 1, end, &b, &str, &n);
        if (!s || !key_add(p, (const unsigned char *)str, n, str == b.d))
            goto out;
    }
    FAST_WS(s, end);
    if (s == end || *s != ':')
        goto out;
    s++;
    FAST_WS(s, end);
    goto value;
after:
    FAST_WS(s, end);
    if (p->depth == 0) {
        ok = s == end; /* else trailing garbage or a second value: yajl's error */
        goto out;
    }
    if (s == end)
        goto out;
    if (p->stack[p->depth - 1]->type == HJ_OBJECT) {
        if (*s == ',') {
            s++;
            FAST_WS(s, end);
            goto key;
        }
        if (*s == '}') {
            cb_end(p);
            s++;
            goto after;
        }
    } else {
        if (*s == ',') {
            s++;
            FAST_WS(s, end);
            goto value;
        }
        if (*s == ']') {
            cb_end(p);
            s++;
            goto after;
        }
    }
out:
    if (b.d != b.inline_d)
        free(b.d);
    return ok;
}

/* Where an arena stood, to wind it back to. */
struct arena_mark {
    struct hj_block *head;
    size_t used, bytes;
};

static void arena_mark(const struct hj_arena *a, struct arena_mark *m)
{
    m->head = a->head;
    m->used = a->head ? a->head->used : 0;
    m->bytes = a->bytes;
}

static void arena_rewind(struct hj_arena *a, const struct arena_mark *m)
{
    while (a->head != m->head) {
        struct hj_block *b = a->head;
        a->head = b->next;
        free(b);
    }
    if (a->head)
        a->head->used = m->used;
    a->bytes = m->bytes;
}

hj *hj_parse(const char *buf, size_t len, char *err, size_t errlen)
{
    struct pstate p;
    pstate_init(&p, len);
    struct arena_mark mark = {0};
    if (p.arena)
        arena_mark(p.arena, &mark);
    if (fast_parse(&p, buf, len) && p.root) {
        if (p.ents != p.inline_ents)
            free(p.ents);
        return p.root;
    }
    pstate_discard(&p);
    if (p.arena)
        arena_rewind(p.arena, &mark);
    return hj_parse_yajl(buf, len, err, errlen);
}

hj *hj_parse_yajl(const char *buf, size_t len, char *err, size_t errlen)
{
    struct pstate p;
    pstate_init(&p, len);
    yajl_handle h = yajl_alloc(&callbacks, NULL, &p);
    if (!h)
        abort();
    yajl_status st = yajl_parse(h, (const unsigned char *)buf, len);
    size_t at = yajl_get_bytes_consumed(h);
    if (st == yajl_status_ok) {
        st = yajl_complete_parse(h);
        at = len; /* what only the end of input reveals is at the end */
    }
    if (st != yajl_status_ok) {
        char reason[160];
        if (p.why)
            snprintf(reason, sizeof(reason), "%s", p.why);
        else
            yajl_reason(h, buf, len, reason, sizeof(reason));
        snprintf(err, errlen, HV_MSG("invalid JSON at byte %zu: %s"), at, reason);
        pstate_discard(&p);
        yajl_free(h);
        return NULL;
    }
    if (p.ents != p.inline_ents)
        free(p.ents);
    yajl_free(h);
    if (!p.root)
        snprintf(err, errlen, HV_MSG("invalid JSON: empty body"));
    return p.root;
}

/* ---- lookups and comparison -------------------------------------------------------------- */

hj *hj_get(const hj *obj, const char *key)
{
    if (!obj || obj->type != HJ_OBJECT)
        return NULL;
    ssize_t at = obj_index(obj, key, strlen(key));
    return at < 0 ? NULL : obj->items[at];
}

const char *hj_get_str(const hj *obj, const char *key)
{
    hj *v = hj_get(obj, key);
    return v && v->type == HJ_STRING ? v->s : NULL;
}

int hj_ptr_split(const char *pointer, char ***tokens_out, size_t *n_out)
{
    *tokens_out = NULL;
    *n_out = 0;
    if (pointer[0] == '\0')
        return 0;
    if (pointer[0] != '/')
        return -1;
    size_t n = 0;
    for (const char *c = pointer; *c; c++)
        n += *c == '/';
    char **toks = xcalloc(n, sizeof(char *));
    const char *c = pointer + 1;
    for (size_t k = 0; k < n; k++) {
        size_t seg = strcspn(c, "/");
        char *t = xcalloc(seg + 1, 1), *o = t;
        for (size_t j = 0; j < seg; j++) {
            if (c[j] == '~') {
                if (j + 1 < seg && (c[j + 1] == '0' || c[j + 1] == '1')) {
                    *o++ = c[j + 1] == '0' ? '~' : '/';
                    j++;
                    continue;
                }
                free(t);
                hj_ptr_tokens_free(toks, k);
                return -1;
            }
            *o++ = c[j];
        }
        toks[k] = t;
        c += seg + (c[seg] == '/');
    }
    *tokens_out = toks;
    *n_out = n;
    return 0;
}

void hj_ptr_tokens_free(char **tokens, size_t n)
{
    for (size_t k = 0; k < n; k++)
        free(tokens[k]);
    free(tokens);
}

bool hj_ptr_append(char *buf, size_t cap, const char *token)
{
    size_t start = strlen(buf), need = 1;
    for (const char *c = token; *c; c++)
        need += (*c == '~' || *c == '/') ? 2 : 1;
    if (start + need >= cap)
        return false; /* buf is left as it was */
    size_t at = start;
    buf[at++] = '/';
    for (const char *c = token; *c; c++) {
        if (*c == '~' || *c == '/') {
            buf[at++] = '~';
            buf[at++] = *c == '~' ? '0' : '1';
        } else {
            buf[at++] = *c;
        }
    }
    buf[at] = '\0';
    return true;
}

/* Array index per RFC 6901: digits, no leading zero. -1 when not an index. */
static long array_index(const char *t)
{
    if (!*t || (t[0] == '0' && t[1]) || strspn(t, "0123456789") != strlen(t) || strlen(t) > 9)
        return -1;
    return strtol(t, NULL, 10);
}

hj *hj_ptr(const hj *doc, const char *pointer)
{
    /* Walks the pointer in place: each token is unescaped into tok (no allocation; a token
     * too long for it names nothing in the trees hvupdater reads, but is still handled). */
    if (!doc || (pointer[0] && pointer[0] != '/'))
        return NULL;
    const hj *cur = doc;
    const char *c = pointer;
    char tok[256];
    while (*c && cur) {
        c++; /* the '/' */
        size_t seg = strcspn(c, "/"), n = 0;
        char *t = seg < sizeof(tok) ? tok : malloc(seg + 1);
        if (!t)
            abort();
        for (size_t j = 0; j < seg; j++) {
            if (c[j] == '~') {
                if (j + 1 < seg && (c[j + 1] == '0' || c[j + 1] == '1')) {
                    t[n++] = c[j + 1] == '0' ? '~' : '/';
                    j++;
                    continue;
                }
                if (t != tok)
                    free(t);
                return NULL; /* malformed escape */
            }
            t[n++] = c[j];
        }
        t[n] = '\0';
        if (cur->type == HJ_OBJECT) {
            ssize_t at = obj_index(cur, t, n);
            cur = at < 0 ? NULL : cur->items[at];
        } else if (cur->type == HJ_ARRAY) {
            long i = array_index(t);
            cur = (i >= 0 && (size_t)i < cur->n) ? cur->items[i] : NULL;
        } else {
            cur = NULL;
        }
        if (t != tok)
            free(t);
        c += seg;
    }
    return (hj *)cur;
}

bool hj_equal(const hj *a, const hj *b)
{
    if (!a || !b)
        return a == b;
    if (a->type != b->type)
        return false;
    switch (a->type) {
    case HJ_NULL:
        return true;
    case HJ_BOOL:
        return a->b == b->b;
    case HJ_INT:
        return a->i == b->i;
    case HJ_FLOAT:
        return a->f == b->f;
    case HJ_STRING:
        return a->slen == b->slen && memcmp(a->s, b->s, a->slen) == 0;
    case HJ_ARRAY:
        if (a->n != b->n)
            return false;
        for (size_t k = 0; k < a->n; k++)
            if (!hj_equal(a->items[k], b->items[k]))
                return false;
        return true;
    case HJ_OBJECT:
        if (a->n != b->n)
            return false;
        for (size_t k = 0; k < a->n; k++)
            if (!hj_equal(a->items[k], hj_get(b, a->keys[k])))
                return false;
        return true;
    }
    return false;
}

/* ---- printing ---------------------------------------------------------------------------- */

static void gen(yajl_gen g, const hj *v)
{
    switch (v->type) {
    case HJ_NULL:
        yajl_gen_null(g);
        break;
    case HJ_BOOL:
        yajl_gen_bool(g, v->b);
        break;
    case HJ_INT:
    case HJ_FLOAT:
        yajl_gen_number(g, v->s, v->slen);
        break;
    case HJ_STRING:
        yajl_gen_string(g, (const unsigned char *)v->s, v->slen);
        break;
    case HJ_ARRAY:
        yajl_gen_array_open(g);
        for (size_t k = 0; k < v->n; k++)
            gen(g, v->items[k]);
        yajl_gen_array_close(g);
        break;
    case HJ_OBJECT:
        yajl_gen_map_open(g);
        for (size_t k = 0; k < v->n; k++) {
            yajl_gen_string(g, (const unsigned char *)v->keys[k], v->klens[k]);
            gen(g, v->items[k]);
        }
        yajl_gen_map_close(g);
        break;
    }
}

char *hj_dump(const hj *v, size_t *len_out)
{
    yajl_gen g = yajl_gen_alloc(NULL);
    if (!g)
        return NULL;
    gen(g, v);
    const unsigned char *buf;
    size_t len;
    yajl_gen_get_buf(g, &buf, &len);
    char *out = xstrndup((const char *)buf, len);
    yajl_gen_free(g);
    if (len_out)
        *len_out = len;
    return out;
}

int hj_check_keys(const hj *o, const char *where, const char *const *allowed, char *err,
                  size_t errlen)
{
    if (!o || o->type != HJ_OBJECT) {
        snprintf(err, errlen, "%s must be an object", where);
        return -1;
    }
    for (size_t k = 0; k < o->n; k++) {
        const char *const *a;
        for (a = allowed; *a && strcmp(*a, o->keys[k]); a++)
            ;
        if (!*a) {
            snprintf(err, errlen, "%s: unknown key \"%s\"", where, o->keys[k]);
            return -1;
        }
    }
    return 0;
}

void hj_ptr_dotted(char *out, size_t cap, const char *obj, const char *pointer)
{
    char **t;
    size_t n;
    snprintf(out, cap, "%s", obj);
    if (hj_ptr_split(pointer, &t, &n) < 0)
        return;
    for (size_t k = 0; k < n; k++) {
        size_t at = strlen(out);
        snprintf(out + at, cap - at, ".%s", t[k]);
    }
    hj_ptr_tokens_free(t, n);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

const char **hj_keys_union(const hj *a, const hj *b, size_t *n_out)
{
    size_t n = 0;
    const char **keys = malloc((a->n + b->n + 1) * sizeof(char *));
    if (!keys)
        abort();
    for (size_t k = 0; k < a->n; k++)
        keys[n++] = a->keys[k];
    for (size_t k = 0; k < b->n; k++)
        if (!hj_get(a, b->keys[k]))
            keys[n++] = b->keys[k];
    qsort(keys, n, sizeof(char *), cmp_str);
    *n_out = n;
    return keys;
}
