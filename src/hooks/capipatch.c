/* capipatch.c: CAPI's way of applying an extension's patches (to a copy; only the spec path
 * copied back), RFC 7386 merge patches, and the diff that makes one JSON Patch per object out
 * of a chain of answers. Every function works on trees the caller owns. */
#include "capipatch.h"
#include "base64.h"
#include "jsonpatch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool hv_capi_patch_defined(const hj *field)
{
    if (!field || field->type != HJ_OBJECT)
        return false;
    const char *t = hj_get_str(field, "patchType"), *p = hj_get_str(field, "patch");
    return (t && t[0]) || (p && p[0]);
}

void hv_merge_patch(hj **target, const hj *patch)
{
    if (!patch || patch->type != HJ_OBJECT) {
        hj_free(*target);
        *target = patch ? hj_clone(patch) : hj_new_null();
        return;
    }
    if (!*target || (*target)->type != HJ_OBJECT) {
        hj_free(*target);
        *target = hj_new_object();
    }
    for (size_t k = 0; k < patch->n; k++) {
        const char *key = patch->keys[k];
        const hj *v = patch->items[k];
        if (v->type == HJ_NULL) {
            hj_obj_del(*target, key);
            continue;
        }
        hj *cur = hj_get(*target, key);
        hj *next = cur ? hj_clone(cur) : NULL;
        hv_merge_patch(&next, v);
        hj_obj_set_take(*target, key, next);
    }
}

/* Set the value at pointer in doc, creating missing parent objects (unstructured's
 * SetNestedField). Takes val. -1 when a parent on the way is not an object. */
static int set_nested(hj *doc, const char *pointer, hj *val)
{
    char **t;
    size_t n;
    if (hj_ptr_split(pointer, &t, &n) < 0 || n == 0) {
        if (n == 0)
            hj_ptr_tokens_free(t, n);
        hj_free(val);
        return -1;
    }
    hj *cur = doc;
    int rc = 0;
    for (size_t k = 0; k + 1 < n && rc == 0; k++) {
        hj *next = hj_get(cur, t[k]);
        if (!next) {
            hj_obj_set_take(cur, t[k], hj_new_object());
            next = hj_get(cur, t[k]);
        }
        if (next->type != HJ_OBJECT)
            rc = -1;
        cur = next;
    }
    if (rc == 0)
        hj_obj_set_take(cur, t[n - 1], val);
    else
        hj_free(val);
    hj_ptr_tokens_free(t, n);
    return rc;
}

int hv_capi_apply(hj **obj, const hj *field, const char *spec_path, char *err, size_t errlen)
{
    const char *type = hj_get_str(field, "patchType");
    const char *b64 = hj_get_str(field, "patch");
    if (!type || !type[0]) {
        snprintf(err, errlen, "patchType is not set");
        return -1;
    }
    bool json_patch = !strcmp(type, "JSONPatch");
    if (!json_patch && strcmp(type, "JSONMergePatch")) {
        snprintf(err, errlen, "unknown patchType %s", type);
        return -1;
    }
    size_t len = 0;
    char *text = b64 ? hv_b64_decode(b64, strlen(b64), &len) : NULL;
    if (b64 && !text) {
        snprintf(err, errlen, "patch is not base64");
        return -1;
    }
    if (!text || len == 0) { /* an empty patch: a no-op for a merge patch, an error for 6902 */
        free(text);
        if (!json_patch)
            return 0;
        snprintf(err, errlen, "empty JSON patch");
        return -1;
    }
    char perr[200];
    hj *p = hj_parse(text, len, perr, sizeof(perr));
    free(text);
    if (!p) {
        snprintf(err, errlen, "patch does not parse: %s", perr);
        return -1;
    }
    int rc = 0;
    if (json_patch && p->type != HJ_ARRAY) {
        snprintf(err, errlen, "JSON patch is not an array");
        rc = -1;
    } else if ((json_patch && p->n == 0) || (!json_patch && p->type == HJ_OBJECT && p->n == 0)) {
        rc = 0; /* nothing to do */
    } else {
        hj *copy = hj_clone(*obj);
        if (json_patch) {
            rc = hv_jsonpatch_apply(&copy, p, err, errlen);
        } else {
            hv_merge_patch(&copy, p);
        }
        if (rc == 0 && copy->type != HJ_OBJECT) {
            snprintf(err, errlen, "the patched object is not a JSON object");
            rc = -1;
        }
        const hj *spec = rc == 0 ? hj_ptr(copy, spec_path) : NULL;
        if (spec) {
            hj *target = hj_clone(*obj);
            if (set_nested(target, spec_path, hj_clone(spec)) < 0) {
                snprintf(err, errlen, "cannot copy %s back", spec_path);
                hj_free(target);
                rc = -1;
            } else {
                hj_free(*obj);
                *obj = target;
            }
        }
        hj_free(copy);
    }
    hj_free(p);
    return rc;
}

void hv_json_diff(const hj *a, const hj *b, const char *path, hj *ops)
{
    if (!a && !b)
        return;
    if (!a) {
        hv_jsonpatch_add_op(ops, "add", path, b);
        return;
    }
    if (!b) {
        hv_jsonpatch_add_op(ops, "remove", path, NULL);
        return;
    }
    if (a->type != HJ_OBJECT || b->type != HJ_OBJECT) {
        if (!hj_equal(a, b))
            hv_jsonpatch_add_op(ops, "replace", path, b);
        return;
    }
    size_t n;
    const char **keys = hj_keys_union(a, b, &n);
    for (size_t k = 0; k < n; k++) {
        const hj *x = hj_get(a, keys[k]), *y = hj_get(b, keys[k]);
        if (hj_equal(x, y))
            continue;
        size_t cap = strlen(path) + 2 * strlen(keys[k]) + 2;
        char *sub = malloc(cap);
        if (!sub)
            abort();
        snprintf(sub, cap, "%s", path);
        hj_ptr_append(sub, cap, keys[k]);
        hv_json_diff(x, y, sub, ops);
        free(sub);
    }
    free(keys);
}
