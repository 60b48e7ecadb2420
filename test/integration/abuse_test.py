#!/usr/bin/env python3
"""abuse_test.py: the real `hvupdater serve` under connection abuse and bad framing.

Real sockets against the real server binary (Python's ssl module is the TLS client; the
server's self-signed CA is trusted). Each case starts its own server on 127.0.0.1:0.
Abusive clients use other loopback source addresses (127.0.0.2, 127.0.0.3: Linux routes all
of 127/8 to lo) so the fresh client on 127.0.0.1 is "another client".

usage: abuse_test.py HVUPDATER_BINARY [CASE...]
cases (default: all):
  flood     2,000 connections from one address (1,000 idle, 1,000 that finished TLS and
            trickle a request head): a fresh client still gets /healthz and a hook answered
  deadline  a TCP connection that sends nothing, one that trickles a TLS ClientHello and a
            TLS connection that trickles its head a byte every 0.5 s are all closed by the
            server once --head-timeout has passed (before: open for as long as bytes came)
  closed    connections the client closes are released at once (no CLOSE-WAIT left)
  framing   differing duplicate Content-Length, Content-Length with chunked encoding,
            a bad Content-Length: 400 and the connection closed (RFC 9112 section 6.3);
            identical duplicates are one value and answered 200; whitespace before a
            field's colon, in the request target, a missing or repeated Host: exactly one
            400 answer, then the close
  limit     --max-connections 16: of a burst of 48 clients none is accepted and closed;
            16 held: the 17th client waits in the listen queue (not
            accepted and closed), and is served as soon as one of the 16 closes
  garbage   malformed request lines and heads: each gets an HTTP answer or a close,
            never a hang (what libmicrohttpd reads as empty lines before a request line,
            e.g. CR LF only or NUL bytes, is closed by the head deadline)

Timings are printed, not asserted; the limits below only tell a hang from an answer.
"""
import os
import re
import resource
import select
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time

HANG = 10.0  # seconds after which "no answer" is a hang
HOOK = "/hooks.runtime.cluster.x-k8s.io/v1alpha1/discovery"

failures = []


def check(cond, what):
    if cond:
        print("  ok: " + what)
    else:
        print("  FAIL: " + what)
        failures.append(what)


class Server:
    def __init__(self, binary, *flags, ca=None):
        self.tmp = tempfile.mkdtemp(prefix="hv-abuse-")
        port_file = os.path.join(self.tmp, "port")
        self.log = open(os.path.join(self.tmp, "server.log"), "w+")
        self.proc = subprocess.Popen(
            [binary, "serve", "--listen", "127.0.0.1:0", "--port-file", port_file,
             "--cert-dir", os.path.join(self.tmp, "tls"), "--log-level", "warn", *flags],
            stdout=self.log, stderr=subprocess.STDOUT)
        t0 = time.monotonic()
        while not (os.path.exists(port_file) and open(port_file).read().strip()):
            if self.proc.poll() is not None or time.monotonic() - t0 > 10:
                self.log.seek(0)
                raise RuntimeError("server did not start: " + self.log.read())
            time.sleep(0.02)
        self.port = int(open(port_file).read())
        self.ctx = ssl.create_default_context(cafile=ca or os.path.join(self.tmp, "tls", "ca.crt"))

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait()
        check(rc == 0, "server exits 0 on SIGTERM (got %s)" % rc)
        if rc != 0:
            self.log.seek(0)
            print(self.log.read()[-3000:])
        self.log.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def tcp(self, src="127.0.0.1", timeout=HANG):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.settimeout(timeout)
        s.bind((src, 0))
        s.connect(("127.0.0.1", self.port))
        return s

    def tls(self, src="127.0.0.1", timeout=HANG):
        return self.ctx.wrap_socket(self.tcp(src, timeout), server_hostname="localhost")

    def request(self, raw, src="127.0.0.1", timeout=HANG):
        """Send raw bytes on a fresh TLS connection; return (first line or None, closed, s)."""
        t0 = time.monotonic()
        s = self.tls(src, timeout)
        s.sendall(raw)
        head, closed = read_answer(s, timeout)
        return head, closed, time.monotonic() - t0, s


def read_answer(s, timeout):
    """Read one HTTP answer. Returns (status line or None, closed-by-server)."""
    buf = b""
    deadline = time.monotonic() + timeout
    while True:
        s.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            chunk = s.recv(65536)
        except socket.timeout:
            return (None, False)
        except (ConnectionError, ssl.SSLError, OSError):
            return (status_of(buf), True)
        if not chunk:
            return (status_of(buf), True)
        buf += chunk
        if b"\r\n\r\n" in buf:
            head, _, rest = buf.partition(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n")[1:]:
                k, _, v = line.partition(b":")
                if k.strip().lower() == b"content-length":
                    length = int(v.strip())
            if len(rest) >= length:
                return (status_of(buf), False)


def read_until_close(s, timeout):
    """Everything the server sends on s until it closes (or timeout passes)."""
    buf = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        s.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            chunk = s.recv(65536)
        except socket.timeout:
            break
        except (ConnectionError, ssl.SSLError, OSError):
            break
        if not chunk:
            break
        buf += chunk
    return buf


def read_all(s, timeout):
    """Everything the server sends on s, and whether it closed s (EOF or reset) in timeout."""
    buf = b""
    deadline = time.monotonic() + timeout
    while True:
        s.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            chunk = s.recv(65536)
        except socket.timeout:
            return buf, False
        except (ConnectionError, ssl.SSLError, OSError):
            return buf, True
        if not chunk:
            return buf, True
        buf += chunk


def one_answer(buf):
    """True when buf is one HTTP answer: a head and exactly the body its Content-Length says."""
    head, sep, rest = buf.partition(b"\r\n\r\n")
    if not sep:
        return False
    lengths = [int(v.strip()) for k, _, v in (line.partition(b":") for line in
               head.split(b"\r\n")[1:]) if k.strip().lower() == b"content-length"]
    return len(lengths) == 1 and len(rest) == lengths[0]


def status_of(buf):
    return buf.split(b"\r\n", 1)[0].decode("latin-1") if buf else None


def is_closed(s, timeout):
    """True when the server closes s (EOF or reset) within timeout."""
    s.settimeout(timeout)
    try:
        while True:
            if not s.recv(4096):
                return True
    except socket.timeout:
        return False
    except (ConnectionError, ssl.SSLError, OSError):
        return True


def get(srv, path, body=None, src="127.0.0.1"):
    if body is None:
        raw = "GET %s HTTP/1.1\r\nHost: localhost\r\n\r\n" % path
    else:
        raw = ("POST %s HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
               "Content-Length: %d\r\n\r\n%s" % (path, len(body), body))
    t0 = time.monotonic()
    try:
        head, _, dt, s = srv.request(raw.encode(), src)
        s.close()
    except OSError as e:
        print("  %s: %s" % (path, e))
        return None, time.monotonic() - t0
    return head, dt


def close_wait(port):
    """The server's sockets in CLOSE-WAIT (state 08 in /proc/net/tcp): local address
    127.0.0.1 (0100007F) and the server's port. A client socket from 127.0.0.2 can get the
    same port number as its own ephemeral port; the server closes the flood's connections
    past the per-address limit, so such a socket is in CLOSE-WAIT until the test closes it."""
    n = 0
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            parts = line.split()
            ip, _, lport = parts[1].partition(":")
            if ip == "0100007F" and int(lport, 16) == port and parts[3] == "08":
                n += 1
    return n


def case_flood(binary):
    print("flood: 2,000 connections from 127.0.0.2")
    srv = Server(binary)
    held = []
    try:
        t0 = time.monotonic()
        slow_ok = 0
        for _ in range(1000):  # slow: TLS done, a request head that never ends
            try:
                s = srv.tls("127.0.0.2", timeout=1)
                s.sendall(b"POST " + HOOK.encode() + b" HTTP/1.1\r\nHost: x\r\n")
                held.append(s)
                slow_ok += 1
            except OSError:
                pass  # closed by the per-address limit: what we want
        for _ in range(1000):  # idle: TCP only, no byte sent
            held.append(srv.tcp("127.0.0.2", timeout=1))
        print("  1000 slow (%d finished TLS) + 1000 idle opened in %.2f s"
              % (slow_ok, time.monotonic() - t0))
        for s in held[:slow_ok]:
            try:
                s.sendall(b"X")
            except OSError:
                pass
        head, dt = get(srv, "/healthz")
        print("  fresh client /healthz: %s in %.1f ms" % (head, dt * 1e3))
        check(head is not None and " 200 " in head, "/healthz answered 200 during the flood")
        head, dt = get(srv, HOOK, "{}")
        print("  fresh client discovery hook: %s in %.1f ms" % (head, dt * 1e3))
        check(head is not None and " 200 " in head, "hook answered 200 during the flood")
    finally:
        for s in held:
            s.close()
        srv.stop()


def case_deadline(binary):
    print("deadline: --head-timeout 2")
    srv = Server(binary, "--head-timeout", "2")
    try:
        idle = srv.tcp()
        t0 = time.monotonic()
        closed = is_closed(idle, HANG)
        print("  idle TCP connection closed after %.2f s" % (time.monotonic() - t0))
        check(closed, "a connection that sends nothing is closed")
        idle.close()

        # A TLS ClientHello trickled a byte every 0.5 s: never a finished handshake.
        hello = ssl.MemoryBIO()
        obj = srv.ctx.wrap_bio(ssl.MemoryBIO(), hello, server_hostname="localhost")
        try:
            obj.do_handshake()
        except ssl.SSLWantReadError:
            pass
        record = hello.read()
        s = srv.tcp()
        t0 = time.monotonic()
        closed = False
        for b in record[:-1]:
            try:
                s.sendall(bytes([b]))
            except OSError:
                closed = True
                break
            r, _, _ = select.select([s], [], [], 0.5)
            if r and (not s.recv(1)):
                closed = True
                break
            if time.monotonic() - t0 > HANG:
                break
        print("  trickled ClientHello closed after %.2f s" % (time.monotonic() - t0))
        check(closed, "a TLS handshake trickled a byte every 0.5 s is closed")
        s.close()

        s = srv.tls()
        head = b"POST " + HOOK.encode() + b" HTTP/1.1\r\nHost: localhost\r\nX-Slow: "
        t0 = time.monotonic()
        closed = False
        for i in range(int(HANG / 0.5)):
            try:
                s.sendall(head[i:i + 1] if i < len(head) else b"a")
            except OSError:
                closed = True
                break
            if is_closed(s, 0.5):
                closed = True
                break
        print("  trickled request head closed after %.2f s" % (time.monotonic() - t0))
        check(closed, "a request head trickled a byte every 0.5 s is closed")
        s.close()

        # A keep-alive connection that answered one request may idle (the deadline is for
        # a head that has started to arrive, and for the first one).
        s = srv.tls()
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
        head, closed = read_answer(s, HANG)
        check(head is not None and " 200 " in head and not closed, "keep-alive answer")
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
        head, closed = read_answer(s, HANG)
        check(head is not None and " 200 " in head, "second request on the same connection")
        s.close()
    finally:
        srv.stop()


def case_closed(binary):
    print("closed: 300 connections closed by the client, 1,100 idle ones held from elsewhere")
    srv = Server(binary)
    flood = []
    try:
        for _ in range(1100):
            flood.append(srv.tcp("127.0.0.2", timeout=1))
        try:
            socks = [srv.tcp("127.0.0.3") for _ in range(100)]
            socks += [srv.tls("127.0.0.4", timeout=5) for _ in range(100)]
        except OSError as e:
            check(False, "connections from another address are served (%s)" % e)
            return
        for s in socks[100:150]:
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")  # head started, never ended
        kept = []
        for _ in range(100):  # one answered request each, then idle keep-alive
            s = srv.tls("127.0.0.5")
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            read_answer(s, HANG)
            kept.append(s)
        socks += kept
        time.sleep(0.3)
        for s in socks:
            s.close()
        t0 = time.monotonic()
        while close_wait(srv.port) and time.monotonic() - t0 < HANG:
            time.sleep(0.05)
        left = close_wait(srv.port)
        print("  CLOSE-WAIT left: %d after %.2f s" % (left, time.monotonic() - t0))
        check(left == 0, "every closed connection is released")
        head, _ = get(srv, "/healthz")
        check(head is not None and " 200 " in head, "server still answers")
    finally:
        for s in flood:
            s.close()
        srv.stop()


def case_framing(binary):
    print("framing")
    srv = Server(binary)
    body = b"{}"
    try:
        cases = [
            ("two differing Content-Length",
             b"Content-Length: 2\r\nContent-Length: 3\r\n\r\n{}x", "400"),
            ("a Content-Length list that differs",
             b"Content-Length: 2, 3\r\n\r\n{}x", "400"),
            ("Content-Length with chunked",
             b"Content-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n", "400"),
            ("Transfer-Encoding that is not chunked",
             b"Transfer-Encoding: gzip\r\n\r\n{}", "400"),
            ("a Content-Length that is not a number",
             b"Content-Length: 2x\r\n\r\n{}", "400"),
            ("a negative Content-Length",
             b"Content-Length: -2\r\n\r\n{}", "400"),
        ]
        for what, tail, want in cases:
            raw = b"POST " + HOOK.encode() + b" HTTP/1.1\r\nHost: localhost\r\n" + tail
            head, closed, dt, s = srv.request(raw)
            if not closed:
                closed = is_closed(s, 2)
            s.close()
            print("  %s: %s (closed %s) in %.1f ms" % (what, head, closed, dt * 1e3))
            check(head is not None and (" %s " % want) in head and closed,
                  "%s: %s and close" % (what, want))
        # Exactly one answer, a 400, then the close: whitespace between a field name and its
        # colon (RFC 9112 section 5.1: reject with 400, a smuggling primitive behind a lenient
        # proxy).
        once = [
            ("Transfer-Encoding with a space before the colon, with Content-Length",
             b"Content-Length: 2\r\nTransfer-Encoding : chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n"),
            ("Transfer-Encoding with a space before the colon",
             b"Transfer-Encoding : chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n"),
            ("another field with a space before the colon",
             b"Content-Type : application/json\r\nContent-Length: 2\r\n\r\n{}"),
            ("a tab before the colon",
             b"Content-Length\t: 2\r\n\r\n{}"),
        ]
        once = [(what, b"POST " + HOOK.encode() + b" HTTP/1.1\r\nHost: localhost\r\n" + tail)
                for what, tail in once]
        # A request without Host, with two, or with a space in its target (RFC 9112 sections
        # 3 and 3.2: 400). libmicrohttpd 0.9.75 answered a missing Host with two 400 heads
        # back to back (its own check, MHD_OPTION_STRICT_FOR_CLIENT), the first announcing a
        # body that is the second head; a space in the target was a close without an answer.
        once += [
            ("an HTTP/1.1 request without Host",
             b"GET /healthz HTTP/1.1\r\n\r\n"),
            ("a hook call without Host",
             b"POST " + HOOK.encode() + b" HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}"),
            ("two Host fields",
             b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nHost: other\r\n\r\n"),
            ("a space in the request target",
             b"GET /healthz x HTTP/1.1\r\nHost: localhost\r\n\r\n"),
        ]
        for what, raw in once:
            s = srv.tls()
            s.sendall(raw)
            got, closed = read_all(s, HANG)
            s.close()
            heads = re.findall(rb"HTTP/1\.[01] (\d{3})", got)
            print("  %s: %s (closed %s)" % (what, [h.decode() for h in heads], closed))
            check(heads == [b"400"] and one_answer(got) and closed,
                  "%s: one 400 answer, nothing after it, then the close; got %r"
                  % (what, got[:400]))
        raw = (b"POST " + HOOK.encode() + b" HTTP/1.1\r\nHost: localhost\r\n"
               b"Content-Length: 2\r\nContent-Length: 2\r\n\r\n" + body)
        head, closed, dt, s = srv.request(raw)
        s.close()
        print("  identical duplicate Content-Length: %s" % head)
        check(head is not None and " 200 " in head, "identical duplicates are one value")
        raw = (b"POST " + HOOK.encode() + b" HTTP/1.1\r\nHost: localhost\r\n"
               b"Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n")
        head, closed, dt, s = srv.request(raw)
        s.close()
        check(head is not None and " 200 " in head, "chunked alone is fine")
    finally:
        srv.stop()


def case_garbage(binary):
    print("garbage (--head-timeout 3)")
    srv = Server(binary, "--head-timeout", "3")
    try:
        cases = [
            b"GARBAGE\r\n\r\n",
            b"GET\r\n\r\n",
            b"GET /healthz\r\n\r\n",
            b"GET /healthz HTTP/1.1 extra\r\n\r\n",
            b"GET /healthz HTTP/9.9\r\nHost: x\r\n\r\n",
            b"GET /healthz FOO/1.1\r\nHost: x\r\n\r\n",
            b"\x00\x01\x02\x03\r\n\r\n",
            b"GET /healthz HTTP/1.1\r\nno colon here\r\n\r\n",
            b"GET /healthz HTTP/1.1\r\n: empty name\r\n\r\n",
            b"GET /healthz HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n",
            b"GET /healthz HTTP/1.1\r\nBad Name: x\r\n\r\n",
            b"GET " + b"/a" * 40000 + b" HTTP/1.1\r\n\r\n",
            b"GET /healthz HTTP/1.1\r\nX: " + b"a" * 200000 + b"\r\n\r\n",
            b"\r\n\r\n\r\n\r\n",
            b"GET /healthz HTTP/1.1\n\n",
        ]
        for raw in cases:
            try:
                head, closed, dt, s = srv.request(raw)
                s.close()
            except OSError as e:  # reset while sending: a close
                head, closed, dt = None, True, 0.0
                print("    (send: %s)" % e)
            what = repr(raw[:40])
            print("  %s: %s (closed %s) in %.1f ms" % (what, head, closed, dt * 1e3))
            check(head is not None or closed, "%s: an answer or a close" % what)
            check(head is None or head.startswith("HTTP/1.1 ") or head.startswith("HTTP/1.0 "),
                  "%s: a status line if anything" % what)
        head, _ = get(srv, "/healthz")
        check(head is not None and " 200 " in head, "server still answers")
    finally:
        srv.stop()


def metric(srv, name):
    """A metric's value from /metrics, or None."""
    raw = ("GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").encode()
    s = srv.tls()
    s.sendall(raw)
    buf, _ = read_all(s, HANG)
    s.close()
    for line in buf.decode(errors="replace").splitlines():
        if line.startswith(name + " "):
            return int(float(line.split()[1]))
    return None


def wait_metric(srv, name, want):
    """Poll /metrics until name reads want (the server's own count, not a sleep); HANG bound."""
    deadline = time.monotonic() + HANG
    while time.monotonic() < deadline:
        v = metric(srv, name)
        if v == want:
            return True
        time.sleep(0.02)
    return False


def case_budget(binary):
    print("budget (--max-body-bytes 4096: 5120 bytes of hook bodies in flight)")
    srv = Server(binary, "--max-body-bytes", "4096")
    gauge = "hvupdater_request_body_bytes_in_flight"
    held = []
    body = b'{"apiVersion":"hooks.runtime.cluster.x-k8s.io/v1alpha1","kind":"DiscoveryRequest"}'

    def padded(size):
        return body + b" " * (size - len(body))

    def begin(size):
        """A hook call whose head says size bytes and whose body stops after 10."""
        s = srv.tls()
        s.sendall(("POST %s HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                   "Content-Length: %d\r\n\r\n" % (HOOK, size)).encode() + padded(size)[:10])
        held.append(s)
        return s

    def call():
        """A whole call on its own connection; the answer's head and body as text."""
        s = srv.tls()
        s.sendall(("POST %s HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                   "Content-Length: %d\r\nConnection: close\r\n\r\n" % (HOOK, len(body)))
                  .encode() + body)
        ans = read_all(s, HANG)[0].decode(errors="replace")
        s.close()
        return ans

    try:
        check(metric(srv, gauge + "_limit") == 5120, "the in-flight limit is 5/4 of the body cap")
        big = begin(4096)
        check(wait_metric(srv, gauge, 4096), "a begun body of 4096 bytes holds them")
        small = begin(1024)
        check(wait_metric(srv, gauge, 5120), "a second body fits beside it: 5120 held")
        ans = call()
        check(" 503 " in ans.split("\r\n")[0],
              "a third body over the budget: 503 (%s)" % ans.split("\r\n")[0])
        check("\r\nRetry-After: 1\r\n" in ans and "server busy" in ans,
              "the 503 says Retry-After: 1 and why")
        big.sendall(padded(4096)[10:])
        a = read_answer(big, HANG)[0]
        check(a is not None and " 200 " in a, "the first finishes: 200 (%s)" % a)
        check(wait_metric(srv, gauge, 1024), "its bytes are given back")
        a = call().split("\r\n")[0]
        check(" 200 " in a, "the third, retried, fits: 200 (%s)" % a)
        small.close()
        check(wait_metric(srv, gauge, 0), "a client that goes away gives its bytes back")
    finally:
        for s in held:
            s.close()
        srv.stop()


def tls12_handshake(srv, ciphers, cafile):
    """Whether a TLS 1.2 client offering only ciphers (OpenSSL names) completes a handshake."""
    ctx = ssl.create_default_context(cafile=cafile)
    ctx.check_hostname = False
    ctx.minimum_version = ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    ctx.set_ciphers(ciphers)
    try:
        s = ctx.wrap_socket(srv.tcp(), server_hostname="localhost")
    except (ssl.SSLError, OSError):
        return None
    got = s.cipher()[0]
    s.close()
    return got


def case_ciphers(binary):
    print("ciphers: TLS 1.2 only with ECDHE and AEAD (the self-signed ECDSA key, and an RSA one)")
    srv = Server(binary)
    try:
        ca = os.path.join(srv.tmp, "tls", "ca.crt")
        for c in ("ECDHE-ECDSA-AES128-SHA", "ECDHE-ECDSA-AES256-SHA"):
            check(tls12_handshake(srv, c, ca) is None, "%s (CBC, SHA-1) refused" % c)
        for c in ("ECDHE-ECDSA-AES128-GCM-SHA256", "ECDHE-ECDSA-AES256-GCM-SHA384",
                  "ECDHE-ECDSA-CHACHA20-POLY1305"):
            check(tls12_handshake(srv, c, ca) == c, "%s accepted" % c)
    finally:
        srv.stop()
    tmp = tempfile.mkdtemp(prefix="hv-rsa-")
    key, crt = os.path.join(tmp, "tls.key"), os.path.join(tmp, "tls.crt")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key,
                    "-out", crt, "-days", "2", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=DNS:localhost"], check=True, capture_output=True)
    srv = Server(binary, "--tls-cert", crt, "--tls-key", key, ca=crt)
    try:
        for c in ("AES128-SHA", "AES128-GCM-SHA256", "AES256-GCM-SHA384"):
            check(tls12_handshake(srv, c, crt) is None, "%s (static RSA key exchange) refused" % c)
        for c in ("ECDHE-RSA-AES128-SHA", "DHE-RSA-AES128-GCM-SHA256"):
            check(tls12_handshake(srv, c, crt) is None, "%s refused" % c)
        for c in ("ECDHE-RSA-AES128-GCM-SHA256", "ECDHE-RSA-CHACHA20-POLY1305"):
            check(tls12_handshake(srv, c, crt) == c, "%s accepted" % c)
    finally:
        srv.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def case_dumpable(binary):
    print("dumpable: the server marks itself not dumpable (no core files, no ptrace by its user)")
    if os.geteuid() != 0:
        check(False, "this case runs as root (it starts the server as nobody)")
        return
    tmp = tempfile.mkdtemp(prefix="hv-dump-")
    os.chmod(tmp, 0o777)
    port_file = os.path.join(tmp, "port")
    proc = subprocess.Popen(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                             binary, "serve", "--listen", "127.0.0.1:0", "--port-file",
                             port_file, "--cert-dir", os.path.join(tmp, "tls"), "--log-level",
                             "warn"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        t0 = time.monotonic()
        while not (os.path.exists(port_file) and open(port_file).read().strip()):
            if proc.poll() is not None or time.monotonic() - t0 > HANG:
                break
            time.sleep(0.02)
        check(proc.poll() is None, "the server runs as nobody")
        # A process that is not dumpable has its /proc/PID files owned by root, not by its
        # own user (proc(5), PR_SET_DUMPABLE).
        st = os.stat("/proc/%d/status" % proc.pid)
        check(st.st_uid == 0, "/proc/PID/status of the server (uid 65534) is owned by root (%d)"
              % st.st_uid)
    finally:
        proc.terminate()
        proc.wait(10)
        shutil.rmtree(tmp, ignore_errors=True)


def case_status(binary):
    print("status listener (--metrics-listen, --max-connections-per-address 8, --head-timeout 2):"
          " 64 trickling connections from 127.0.0.2")
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    sport = probe.getsockname()[1]
    probe.close()
    srv = Server(binary, "--metrics-listen", "127.0.0.1:%d" % sport,
                 "--max-connections-per-address", "8", "--head-timeout", "2")
    held = []
    try:
        for _ in range(64):  # plain HTTP heads that never end, a byte now and then
            s = socket.socket()
            s.settimeout(1)
            s.bind(("127.0.0.2", 0))
            try:
                s.connect(("127.0.0.1", sport))
                s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
            except OSError:
                pass
            held.append(s)
        # keep trickling while a fresh client from another address asks /healthz
        t0 = time.monotonic()
        for s in held:
            try:
                s.sendall(b"X")
            except OSError:
                pass
        c = socket.create_connection(("127.0.0.1", sport), timeout=HANG)
        c.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        ans, _ = read_all(c, HANG)
        c.close()
        head = ans.split(b"\r\n")[0].decode(errors="replace")
        check(" 200 " in head, "/healthz from a fresh client answered 200 (%s)" % head)
        # the tricklers: at most 8 of them were let in, and those are shut down by the head
        # deadline although they keep sending
        open_ = 0
        deadline = time.monotonic() + HANG
        while time.monotonic() < deadline:
            open_ = 0
            for s in held:
                try:
                    s.sendall(b"X")
                    s.settimeout(0.01)
                    if s.recv(1) == b"":
                        continue
                    open_ += 1
                except socket.timeout:
                    open_ += 1
                except OSError:
                    pass
            if open_ == 0:
                break
            time.sleep(0.3)
        check(open_ == 0, "every trickling connection was closed by the head deadline (%d open "
              "after %.1f s)" % (open_, time.monotonic() - t0))
    finally:
        for s in held:
            s.close()
        srv.stop()


def case_limit(binary):
    print("limit: --max-connections 16 (--threads 4): the 17th client waits, then is served")
    srv = Server(binary, "--max-connections", "16", "--max-connections-per-address", "16",
                 "--threads", "4")
    held, waiting = [], None
    try:
        # a burst: 48 clients connect back to back (TCP only), most of them before the server
        # has started serving any: 16 are held, the others wait; none is accepted and closed
        burst = [srv.tcp("127.0.0.4") for _ in range(48)]
        time.sleep(1.0)
        closed = 0
        for s in burst:
            if select.select([s], [], [], 0)[0]:
                try:
                    closed += not s.recv(1)
                except OSError:
                    closed += 1
        check(closed == 0,
              "a burst of 48 at the limit: none accepted and closed (%d were)" % closed)
        for s in burst:
            s.close()
        time.sleep(1.0)  # the server closes the 16 it held, then the 32 it takes after them
        for _ in range(16):
            s = srv.tls("127.0.0.2")
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            head, _ = read_answer(s, HANG)
            held.append(s)
        check(len(held) == 16, "16 keep-alive connections served")
        # the 17th: TCP completes from the listen queue; nothing may close it while it waits
        waiting = srv.tcp("127.0.0.3")
        check(not is_closed(waiting, 1.0),
              "the 17th connection is neither accepted and closed nor answered: it waits")
        held.pop().close()
        t0 = time.monotonic()
        try:
            tls = srv.ctx.wrap_socket(waiting, server_hostname="localhost")
            tls.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            head, _ = read_answer(tls, HANG)
            waiting = tls
        except OSError as e:
            head = None
            print("  17th: %s" % e)
        print("  17th served %.3f s after one of the 16 closed" % (time.monotonic() - t0))
        check(head is not None and " 200 " in head,
              "the 17th is served once one of the 16 closes (%s)" % head)
    finally:
        for s in held:
            s.close()
        if waiting is not None:
            waiting.close()
        srv.stop()


CASES = {"flood": case_flood, "deadline": case_deadline, "closed": case_closed,
         "framing": case_framing, "garbage": case_garbage, "budget": case_budget,
         "ciphers": case_ciphers, "dumpable": case_dumpable,
         "status": case_status, "limit": case_limit}


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    binary = sys.argv[1]
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > 8192:
        hard = 8192
    if soft != resource.RLIM_INFINITY and soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    for name in sys.argv[2:] or list(CASES):
        CASES[name](binary)
    if failures:
        print("%d check(s) failed:" % len(failures))
        for f in failures:
            print("  " + f)
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
