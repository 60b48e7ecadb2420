/* capipatch.h: Cluster API's patch rules on hj trees, so that hvupdater can chain extensions
 * the way CAPI chains them: an answer's {patchType, patch} is applied to a copy of an object
 * and only the spec path is copied back (internal/util/patch.ApplyPatchToObject); RFC 7386
 * merge patches; and the RFC 6902 patch that takes one spec to another.
 * Inputs are borrowed; hv_capi_apply replaces *obj's spec in place. */
#ifndef HV_CAPIPATCH_H
#define HV_CAPIPATCH_H

#include "json.h"

#include <stdbool.h>
#include <stddef.h>

/* Is a response patch field present the way CAPI's Patch.IsDefined says (a patchType or a
 * non-empty patch)? */
bool hv_capi_patch_defined(const hj *field);

/* Apply one response patch field ({"patchType": "JSONPatch"|"JSONMergePatch", "patch":
 * base64}) to *obj as CAPI does: to a copy, then only the value at spec_path ("/spec" or
 * "/spec/template/spec") is copied back (parents created when missing; nothing copied when
 * the patched copy lacks it). An empty JSON Patch or {} merge patch is a no-op. Returns 0, or
 * -1 with a stable one-line reason in err (obj unchanged). */
int hv_capi_apply(hj **obj, const hj *field, const char *spec_path, char *err, size_t errlen);

/* RFC 7386: merge patch into *target (replaced when patch is not an object). */
void hv_merge_patch(hj **target, const hj *patch);

/* Append to ops the RFC 6902 operations that turn a into b, both found at pointer path of
 * their documents (a NULL: absent). Objects are compared member by member (keys in sorted
 * order, so the result is deterministic); anything else that differs is replaced whole. */
void hv_json_diff(const hj *a, const hj *b, const char *path, hj *ops);

#endif
