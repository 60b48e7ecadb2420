/* jsonpatch.h: build and apply RFC 6902 JSON Patches on hj trees.
 * hv_jsonpatch_add_op appends a copy of value (borrowed) to the ops array it is given;
 * hv_jsonpatch_apply edits *doc in place (it may replace the root) and never takes patch. */
#ifndef HV_JSONPATCH_H
#define HV_JSONPATCH_H

#include "json.h"

/* Append {"op": op, "path": path, "value": copy of value} (value NULL: no value member). */
void hv_jsonpatch_add_op(hj *ops, const char *op, const char *path, const hj *value);
/* Apply all operations in order; on error *doc may be partly patched: apply to a copy when
 * that matters. Returns 0, or -1 with a one-line reason in err. */
int hv_jsonpatch_apply(hj **doc, const hj *patch, char *err, size_t errlen);

#endif
