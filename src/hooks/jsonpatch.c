/* jsonpatch.c: RFC 6902 operations (add, remove, replace, move, copy, test) over hj trees.
 * The server only emits "add"/"replace"; the full set exists so tests (and anyone replaying
 * a patch) can apply exactly what CAPI would apply. */
#include "jsonpatch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void hv_jsonpatch_add_op(hj *ops, const char *op, const char *path, const hj *value)
{
    hj *o = hj_new_object();
    hj_obj_set_take(o, "op", hj_new_string(op));
    hj_obj_set_take(o, "path", hj_new_string(path));
    if (value)
        hj_obj_set_take(o, "value", hj_clone(value));
    hj_arr_push_take(ops, o);
}

static long index_of(const char *t, size_t n, bool allow_end)
{
    if (allow_end && strcmp(t, "-") == 0)
        return (long)n;
    if (!*t || (t[0] == '0' && t[1]) || strspn(t, "0123456789") != strlen(t) || strlen(t) > 9)
        return -1;
    long i = strtol(t, NULL, 10);
    if ((size_t)i < n || (allow_end && (size_t)i == n))
        return i;
    return -1;
}

/* Find the container holding the pointer's last token. */
static hj *parent_of(hj *doc, char **toks, size_t n)
{
    hj *cur = doc;
    for (size_t k = 0; k + 1 < n && cur; k++) {
        if (cur->type == HJ_OBJECT) {
            cur = hj_get(cur, toks[k]);
        } else if (cur->type == HJ_ARRAY) {
            long i = index_of(toks[k], cur->n, false);
            cur = (i >= 0 && cur->n) ? cur->items[i] : NULL;
        } else {
            cur = NULL;
        }
    }
    return cur;
}

/* Detach and return the value at the pointer (NULL if absent). */
static hj *take_at(hj **doc, char **toks, size_t n)
{
    if (n == 0) {
        hj *v = *doc;
        *doc = hj_new_null();
        return v;
    }
    hj *p = parent_of(*doc, toks, n);
    const char *last = toks[n - 1];
    if (p && p->type == HJ_OBJECT) {
        hj *v = hj_get(p, last);
        if (!v)
            return NULL;
        hj *copy = hj_clone(v);
        hj_obj_del(p, last);
        return copy;
    }
    if (p && p->type == HJ_ARRAY && p->n) {
        long i = index_of(last, p->n, false);
        if (i < 0)
            return NULL;
        hj *v = p->items[i];
        memmove(&p->items[i], &p->items[i + 1], (p->n - (size_t)i - 1) * sizeof(hj *));
        p->n--;
        return v;
    }
    return NULL;
}

static int put_at(hj **doc, char **toks, size_t n, hj *val, bool replace_only)
{
    if (n == 0) {
        hj_free(*doc);
        *doc = val;
        return 0;
    }
    hj *p = parent_of(*doc, toks, n);
    const char *last = toks[n - 1];
    if (p && p->type == HJ_OBJECT) {
        if (replace_only && !hj_get(p, last))
            goto fail;
        hj_obj_set_take(p, last, val);
        return 0;
    }
    if (p && p->type == HJ_ARRAY) {
        long i = index_of(last, p->n, !replace_only);
        if (i < 0)
            goto fail;
        if (replace_only) {
            hj_free(p->items[i]);
            p->items[i] = val;
            return 0;
        }
        hj_arr_push_take(p, val); /* grows; then shift into place */
        memmove(&p->items[i + 1], &p->items[i], (p->n - 1 - (size_t)i) * sizeof(hj *));
        p->items[i] = val;
        return 0;
    }
fail:
    hj_free(val);
    return -1;
}

int hv_jsonpatch_apply(hj **doc, const hj *patch, char *err, size_t errlen)
{
    if (!patch || patch->type != HJ_ARRAY) {
        snprintf(err, errlen, "JSON patch is not an array");
        return -1;
    }
    for (size_t k = 0; k < patch->n; k++) {
        const hj *o = patch->items[k];
        const char *op = hj_get_str(o, "op"), *path = hj_get_str(o, "path");
        const char *from = hj_get_str(o, "from");
        const hj *value = hj_get(o, "value");
        char **toks = NULL, **ftoks = NULL;
        size_t n = 0, fn = 0;
        int rc = -1;
        if (!op || !path || hj_ptr_split(path, &toks, &n) < 0) {
            snprintf(err, errlen, "operation %zu: missing op or bad path", k);
            return -1;
        }
        if (!strcmp(op, "add") && value) {
            rc = put_at(doc, toks, n, hj_clone(value), false);
        } else if (!strcmp(op, "replace") && value) {
            rc = put_at(doc, toks, n, hj_clone(value), true);
        } else if (!strcmp(op, "remove")) {
            hj *v = n ? take_at(doc, toks, n) : NULL;
            rc = v ? 0 : -1;
            hj_free(v);
        } else if (!strcmp(op, "test") && value) {
            rc = hj_equal(hj_ptr(*doc, path), value) ? 0 : -1;
        } else if ((!strcmp(op, "move") || !strcmp(op, "copy")) && from &&
                   hj_ptr_split(from, &ftoks, &fn) == 0) {
            hj *v = NULL;
            if (!strcmp(op, "copy")) {
                const hj *src = hj_ptr(*doc, from);
                v = src ? hj_clone(src) : NULL;
            } else if (!(fn <= n && strncmp(path, from, strlen(from)) == 0 &&
                         (path[strlen(from)] == '/' || path[strlen(from)] == '\0') && fn < n)) {
                v = take_at(doc, ftoks, fn);
            }
            rc = v ? put_at(doc, toks, n, v, false) : -1;
            hj_ptr_tokens_free(ftoks, fn);
        }
        hj_ptr_tokens_free(toks, n);
        if (rc < 0) {
            snprintf(err, errlen, "operation %zu (%s %s) cannot be applied", k, op, path);
            return -1;
        }
    }
    return 0;
}
