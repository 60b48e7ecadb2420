/* acceptor.h: the hook listener's socket and the thread that accepts its connections.
 *
 * libmicrohttpd's thread pool lets every worker accept from one shared socket, each taking up
 * to 10 connections a turn, so a burst of new connections lands on whichever workers woke
 * first: in the hook bench two of four workers held all 64 connections (58 and 6 in one run)
 * and the connections of the crowded one waited for the others. An acceptor owns the socket
 * instead and hands each connection to a hand-off function (the server's: MHD_add_connection,
 * which gives it to the worker its descriptor number picks, so consecutive connections go
 * round the workers).
 *
 * It stops accepting while `limit` connections are held, so that further clients wait in the
 * listen queue as they did with libmicrohttpd's own accept; it accepts again as soon as one
 * closes. A connection is held from its hand-off (the acceptor counts it) until the server
 * reports its end with hv_acceptor_held(a, -1) (libmicrohttpd's close notification): counting
 * from libmicrohttpd's start notification instead would let a series of accepts overshoot the
 * limit, the workers starting added connections later, from a queue. When the process is out of
 * descriptors it tries again a tenth of a second later instead of spinning on the ready socket. */
#ifndef HV_ACCEPTOR_H
#define HV_ACCEPTOR_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

struct hv_acceptor;

/* Takes the accepted descriptor fd (non-blocking, close-on-exec) for good, closing it itself
 * when it cannot serve it; false when it could not (the connection is then not held). When it
 * returns true, hv_acceptor_held(a, -1) must follow once the connection ends. */
typedef bool (*hv_accept_hand)(void *ctx, int fd, const struct sockaddr *sa, socklen_t len);

/* Binds and listens on sa (port 0: any free port; IPv6 addresses take IPv6 only, as
 * libmicrohttpd's listener did); no thread yet. NULL with err when the address cannot be
 * bound. */
struct hv_acceptor *hv_acceptor_open(const struct sockaddr *sa, socklen_t sl, unsigned limit,
                                     char *err, size_t errlen);
/* The port it listens on. */
unsigned hv_acceptor_port(const struct hv_acceptor *a);
/* Starts the accepting thread; -1 with err when it cannot start. */
int hv_acceptor_run(struct hv_acceptor *a, hv_accept_hand hand, void *ctx, char *err,
                    size_t errlen);
/* A connection handed over ended (-1); safe from any thread. (The acceptor counts +1 itself
 * at each hand-off.) */
void hv_acceptor_held(struct hv_acceptor *a, int delta);
/* Waits up to ms for the thread to stop accepting at the limit; true when it has (tests). */
bool hv_acceptor_wait_parked(struct hv_acceptor *a, unsigned ms);
/* Stops the thread and closes the listening socket (nothing is accepted after it returns);
 * hv_acceptor_held may still be called until hv_acceptor_free. */
void hv_acceptor_stop(struct hv_acceptor *a);
void hv_acceptor_free(struct hv_acceptor *a);

#endif
