/* vs_xml.h: building vim25 SOAP requests and reading their answers with libxml2.
 *
 * A vs_buf owns its text (vs_buf_free wipes and frees it: a Login body holds a password).
 * Parsed documents belong to the caller (xmlFreeDoc); node pointers borrow from them.
 * Every value written into a request goes through vs_buf_esc.
 */
#ifndef HV_VS_XML_H
#define HV_VS_XML_H

#include <stdbool.h>
#include <stddef.h>
#include <libxml/tree.h>

#include "backend.h"

#define VS_RESPONSE_MAX ((size_t)8 * 1024 * 1024) /* larger answers are refused */

struct vs_buf {
    char *data;
    size_t len;
    size_t cap;
    bool failed; /* out of memory, or a value XML cannot carry */
};

void vs_buf_init(struct vs_buf *b);
void vs_buf_free(struct vs_buf *b);
void vs_buf_add(struct vs_buf *b, const char *text); /* raw markup */
void vs_buf_addf(struct vs_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void vs_buf_addn(struct vs_buf *b, const char *data, size_t len);
/* Append text escaped for element content and attribute values. Control characters XML 1.0
 * forbids and invalid UTF-8 mark the buffer failed. */
void vs_buf_esc(struct vs_buf *b, const char *text);
/* <name>escaped value</name> */
void vs_buf_elem(struct vs_buf *b, const char *name, const char *value);
void vs_buf_elem_i64(struct vs_buf *b, const char *name, long long value);
/* <name type="type">value</name>: a ManagedObjectReference */
void vs_buf_moref(struct vs_buf *b, const char *name, const char *type, const char *value);

/* Envelope around one vim25 method call on the object (this_type, this_value). */
void vs_env_begin(struct vs_buf *b, const char *method, const char *this_type,
                  const char *this_value);
void vs_env_end(struct vs_buf *b, const char *method);

/* Parse an answer: no network, no DTD, no entity substitution; a document carrying a DTD
 * is refused. Returns NULL and fills err on failure. */
xmlDocPtr vs_xml_parse(const char *data, size_t len, struct hv_err *err);
/* The first element inside soapenv:Body (a <XResponse> or a <Fault>), or NULL. */
xmlNodePtr vs_xml_body(xmlDocPtr doc);
/* First child element / next sibling element with the local name (NULL name: any). */
xmlNodePtr vs_xml_child(xmlNodePtr node, const char *name);
xmlNodePtr vs_xml_next(xmlNodePtr node, const char *name);
bool vs_xml_is(xmlNodePtr node, const char *name);
/* Copy the node's text. Returns false when absent or when it did not fit. */
bool vs_xml_text(xmlNodePtr node, char *out, size_t outlen);
/* Text of the first child element called name. */
bool vs_xml_child_text(xmlNodePtr node, const char *name, char *out, size_t outlen);
/* Local part of the node's xsi:type ("" when absent). */
void vs_xml_xsi_type(xmlNodePtr node, char *out, size_t outlen);

/* A SOAP fault or a task's LocalizedMethodFault. */
struct vs_fault {
    char type[96];     /* vim25 fault type, e.g. "InvalidPowerState" */
    char message[256]; /* faultstring / localizedMessage: logs only */
};

/* When node is a soapenv:Fault, fill f and return true. */
bool vs_xml_fault(xmlNodePtr node, struct vs_fault *f);
/* Read a LocalizedMethodFault element (<fault xsi:type=...>, <localizedMessage>). */
void vs_xml_method_fault(xmlNodePtr node, struct vs_fault *f);
/* Stable code for a vim25 fault type. */
enum hv_errcode vs_fault_code(const char *type);
/* err = code of the fault, detail "<what>: <type>: <message>". */
int vs_fault_err(const struct vs_fault *f, const char *what, struct hv_err *err);

/* Fill err (code + detail) and return the code. */
int vs_err(struct hv_err *err, enum hv_errcode code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
