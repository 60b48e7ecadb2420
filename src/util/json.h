/* json.h: an owning JSON value tree with Kubernetes number semantics.
 *
 * Integer literals are kept as int64 and other numbers as double, and every number keeps its
 * source text so it can be written back byte for byte (4096 stays 4096, 4096.0 stays 4096.0).
 * Ownership: hj_parse/hj_new_* return a tree owned by the caller (free with hj_free);
 * hj_get/hj_ptr return borrowed pointers into a tree; *_take arguments transfer ownership.
 */
#ifndef HV_JSON_H
#define HV_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HJ_MAX_DEPTH   64
#define HJ_MAX_MEMBERS 4096 /* per object: keeps key lookups bounded on hostile input */

enum hj_type { HJ_NULL, HJ_BOOL, HJ_INT, HJ_FLOAT, HJ_STRING, HJ_ARRAY, HJ_OBJECT };

typedef struct hj hj;
struct hj_arena;
struct hj {
    enum hj_type type;
    bool b;
    struct hj_arena *arena; /* the arena it was made in, NULL when made with malloc */
    int64_t i;
    double f;
    char *s;     /* HJ_STRING: value; HJ_INT/HJ_FLOAT: source text */
    size_t slen; /* length of s */
    size_t n;    /* items in an array/object */
    size_t cap;
    hj **items;    /* array items or object values */
    char **keys;   /* object keys, in document order */
    size_t *klens; /* their lengths */
};

/* A request arena: between hj_arena_begin and hj_arena_end, every value this thread makes
 * comes from the arena, hj_free of it is (nearly) free, and hj_arena_end releases them all.
 * Values made in an arena must not outlive it nor be put into trees made outside it (that
 * aborts). Strings from hj_dump and pointer tokens are always malloc'd. */
struct hj_arena {
    struct hj_block *head;
    size_t bytes; /* held in blocks */
};
void hj_arena_begin(struct hj_arena *a);
void hj_arena_end(struct hj_arena *a);

/* The node budget: a parse of len bytes makes at most hj_node_budget(len) values (a value
 * costs about 130 bytes while parsing), so its memory stays a small multiple of its input
 * (about 17x, plus 530 KiB) however dense the input: `[0,0,...]` makes one value per 2 bytes,
 * a Kubernetes object one per 20-40 (managedFields, its densest part, one per 6-12). */
#define HJ_BYTES_PER_NODE 8
#define HJ_NODE_SLACK     4096
size_t hj_node_budget(size_t len);

/* Parse exactly one JSON value (surrounding whitespace allowed). NULL on error with a stable
 * one-line reason in err (e.g. "invalid JSON at byte 12: ..."). */
hj *hj_parse(const char *buf, size_t len, char *err, size_t errlen);
/* The same parse by yajl alone: the reference hj_parse's own one-pass reader of the common case
 * must agree with, tree for tree and message for message (the unit test and fuzz_hooks compare
 * them); hj_parse falls back to it on anything that reader does not take. */
hj *hj_parse_yajl(const char *buf, size_t len, char *err, size_t errlen);
void hj_free(hj *v);
hj *hj_clone(const hj *v);

hj *hj_new_null(void);
hj *hj_new_bool(bool b);
hj *hj_new_int(int64_t i);
hj *hj_new_string(const char *s);
hj *hj_new_stringn(const char *s, size_t n);
/* Text cut to fit a fixed buffer (snprintf's "%s" into a record field or a message) may end
 * inside a UTF-8 sequence, which no JSON reader takes back: the length of s[0..n) without
 * such an incomplete last sequence, and a string node / an in-place cut of it. */
size_t hj_text_len(const char *s, size_t n);
hj *hj_new_text(const char *s);
void hj_text_cut(char *s);
/* snprintf(dst, cap, "%s", src), then hj_text_cut: text into a fixed field. */
void hj_text_copy(char *dst, size_t cap, const char *src);
hj *hj_new_array(void);
hj *hj_new_object(void);
/* Set key in obj (replacing an old value) / append to arr; both take ownership of val. */
void hj_obj_set_take(hj *obj, const char *key, hj *val);
void hj_arr_push_take(hj *arr, hj *val);
/* Remove key from obj; returns true if it was there. */
bool hj_obj_del(hj *obj, const char *key);

/* Borrowed lookups; NULL when absent or when v is not of the needed type. */
hj *hj_get(const hj *obj, const char *key);
const char *hj_get_str(const hj *obj, const char *key);
/* RFC 6901 pointer lookup ("" is the whole document). */
hj *hj_ptr(const hj *doc, const char *pointer);

/* Deep equality as Kubernetes unstructured values compare: int 4096 != float 4096.0. */
bool hj_equal(const hj *a, const hj *b);

/* Compact JSON text; caller frees. NULL only on allocation failure. */
char *hj_dump(const hj *v, size_t *len_out);

/* Helpers on pointers: split "/a/b~1c" into unescaped tokens (caller frees with
 * hj_ptr_tokens_free); returns -1 on a malformed pointer. */
int hj_ptr_split(const char *pointer, char ***tokens_out, size_t *n_out);
void hj_ptr_tokens_free(char **tokens, size_t n);
/* Append the escaped form of token to a pointer buffer; false when it would not fit. */
bool hj_ptr_append(char *buf, size_t cap, const char *token);
/* obj and the pointer's tokens joined by dots: "machine" + "/spec/version" ->
 * "machine.spec.version" (truncated to cap; just obj when the pointer is malformed). */
void hj_ptr_dotted(char *out, size_t cap, const char *obj, const char *pointer);
/* The keys of objects a and b, each once, in strcmp order: a malloc'd array (free it) of
 * strings borrowed from a and b; *n_out is its length. */
const char **hj_keys_union(const hj *a, const hj *b, size_t *n_out);

/* "where must be an object" / "where: unknown key" unless o is an object whose keys are all
 * in allowed (NULL-terminated): the strict key check of the config file's sections. */
int hj_check_keys(const hj *o, const char *where, const char *const *allowed, char *err,
                  size_t errlen);

#endif
