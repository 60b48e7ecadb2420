/* tls.h: the HTTPS serving certificate (hot-reloaded on rotation) and self-signed bootstrap.
 *
 * Ownership: hv_tls_open() returns a handle the caller frees with hv_tls_free() after the MHD
 * daemon using it is stopped. Everything the callback hands to GnuTLS stays owned by the handle.
 * Thread safety: the callback and hv_tls_maybe_reload() may run concurrently from any thread.
 */
#ifndef HV_TLS_H
#define HV_TLS_H

#include <stddef.h>

#include <gnutls/gnutls.h>
#include <gnutls/abstract.h>

struct hv_tls;

/* Load a PEM certificate chain (leaf first) and its PEM private key. Returns NULL and fills err
 * when a file is unreadable, holds no certificate/key, or the key does not match the leaf. */
struct hv_tls *hv_tls_open(const char *cert_file, const char *key_file, char *err, size_t errlen);

/* Free t and every generation it kept; deactivates it first if it is the active one. */
void hv_tls_free(struct hv_tls *t);

/* Make t the handle hv_tls_cert_callback serves (process-wide; NULL deactivates). */
void hv_tls_activate(struct hv_tls *t);

/* The function to pass with MHD_OPTION_HTTPS_CERT_CALLBACK. At most once per second it calls
 * hv_tls_maybe_reload() on the active handle, then serves its current chain and key. */
int hv_tls_cert_callback(gnutls_session_t s, const gnutls_datum_t *req_ca_dn, int nreqs,
                         const gnutls_pk_algorithm_t *pk_algos, int pk_algos_length,
                         gnutls_pcert_st **pcert, unsigned int *pcert_length,
                         gnutls_privkey_t *pkey);

/* Re-read both files if either one's identity (device, inode, size, mtime of the file the path
 * resolves to) changed. Returns 1 reloaded, 0 unchanged, -1 error: the previous certificate
 * stays in service, err is filled, and the next call tries again. */
int hv_tls_maybe_reload(struct hv_tls *t, char *err, size_t errlen);

/* Read a PEM file of CA certificates (for client certificate checks): the text, which the
 * caller frees, or NULL with err filled when it is unreadable or holds no certificate. */
char *hv_tls_read_ca_bundle(const char *path, char *err, size_t errlen);

/* GnuTLS priority string for MHD_OPTION_HTTPS_PRIORITIES: TLS 1.2 and 1.3 only. */
const char *hv_tls_priorities(void);

/* When the certificate now served expires (Unix seconds; 0 if unknown). */
long long hv_tls_not_after(struct hv_tls *t);

/* Number of successful reloads since hv_tls_open() (0 for the initial load). */
unsigned hv_tls_generation(const struct hv_tls *t);

/* Ensure dir (created 0700 if missing) holds ca.crt (self-signed ECDSA P-256 CA), tls.crt (leaf
 * signed by it, serverAuth, SANs = dns_names + ip_addrs, each a NULL-terminated list or NULL)
 * and tls.key (0600), valid one year. Existing files are kept when the key matches the leaf,
 * the leaf verifies against ca.crt, covers every requested name and is valid for 24 more hours.
 * The CA key is never written. Returns 1 written, 0 kept, -1 error (err filled). */
int hv_tls_make_selfsigned(const char *dir, const char *const *dns_names,
                           const char *const *ip_addrs, char *err, size_t errlen);

#endif /* HV_TLS_H */
