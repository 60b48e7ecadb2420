#!/usr/bin/python3
"""log_compare.py: a line of hvupdater's (--log-format capi) against a line of CAPI's manager
(--logging-format=json), key by key, from the same CAPI lab run.

Needs the CAPI lab started with HV_CAPI_LOG_FORMAT=json (up.sh: CAPI's managers with
--logging-format=json, hvupdater with its config's "log": {"format": "capi"}) and a Machine
updated in place (capi_e2e.py -k scale_up -k in_place), so that both logs hold lines about a
Machine:
  CAPI's      the first line of capi-manager.log with a "Machine" object and a "v"
  hvupdater's the last UpdateMachine line of hvupdater's log (it has a "Machine" object)
Compared: ts (a number of milliseconds since the epoch, both within this lab run), caller
(dir/file:line), msg (a string), v (an integer), Machine ({"name","namespace"}, in that
order, both strings), no "level" in either, the same first keys (ts, caller, msg), the
Machine before v. Then the
error shape: hvupdater's line for a request it refuses (this script sends one body that is no
JSON object) has err, a string, last; where CAPI's log has a line with err (controller-
runtime's "Reconciler error" and the like), its err is a string too (its keys are printed;
hvupdater's error-level lines, without v as zapr's Error writes them, are checked by
test/unit/test_log.c and integration.ops.capi-logs).

Prints "ok ..." / "FAIL ..." per check, both lines, and `N passed, N failed`; exit 1 on a
failure.
"""
import json
import os
import re
import ssl
import sys
import time
import urllib.error
import urllib.request

STATE = os.environ.get("HV_CAPI_STATE", "")
HVLOG = os.environ.get("HV_CAPI_HVUPDATER_LOG", "")
CALLER = re.compile(r"^[\w.-]+/[\w.-]+:[1-9][0-9]*$")
passed = failed = 0


def check(cond, what, detail=""):
    global passed, failed
    if cond:
        passed += 1
        print("ok   " + what)
    else:
        failed += 1
        print("FAIL " + what + (": " + str(detail)[:600] if detail else ""))
    return cond


def json_lines(path):
    """(objects, number of non-empty lines) of a log file."""
    out, n = [], 0
    with open(path, errors="replace") as f:
        for line in f:
            if not line.strip():
                continue
            n += 1
            try:
                v = json.loads(line)
            except ValueError:
                continue
            if isinstance(v, dict):
                out.append(v)
    return out, n


def is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def is_num(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def refuse_one(hv):
    """Send hvupdater one hook request whose body is no JSON object (it answers 400 and logs
    the refusal with err)."""
    listening = [e for e in hv if e.get("event") == "listening"]
    if not listening:
        return False
    port, ca = listening[-1]["port"], listening[-1]["ca"]
    req = urllib.request.Request(
        "https://127.0.0.1:%d/hooks.runtime.cluster.x-k8s.io/v1alpha1/canupdatemachine/"
        "can-update-machine" % port, data=b"[]", method="POST",
        headers={"Content-Type": "application/json"})
    try:
        ctx = ssl.create_default_context(cafile=ca)
        ctx.check_hostname = False  # the lab's certificate names localhost, not 127.0.0.1
        urllib.request.urlopen(req, context=ctx, timeout=10)
    except urllib.error.HTTPError as e:
        return e.code == 400
    except (urllib.error.URLError, OSError) as e:
        print("     request to hvupdater failed: %s" % e)
    return False


def main():
    for v in ("HV_CAPI_STATE", "HV_CAPI_HVUPDATER_LOG"):
        if not os.environ.get(v):
            sys.exit("log_compare: %s is not set: eval \"$(HV_CAPI_LOG_FORMAT=json "
                     "test/capi/up.sh)\" first" % v)
    # the lab's start and now bound every ts of this run (milliseconds)
    t_start = os.stat(os.path.join(STATE, "pki", "ca.crt")).st_mtime * 1e3 - 1e3
    capi, n_capi = json_lines(os.path.join(STATE, "capi-manager.log"))
    if not check(n_capi and len(capi) >= 0.9 * n_capi,
                 "CAPI's manager logs JSON (%d of %d lines; up.sh HV_CAPI_LOG_FORMAT=json "
                 "gives it --logging-format=json)" % (len(capi), n_capi)):
        return 1
    hv, n_hv = json_lines(HVLOG)
    with_msg = sum(1 for e in hv if "msg" in e)
    check(n_hv and with_msg == n_hv,
          "hvupdater logs the capi format (%d of %d lines JSON with msg)" % (with_msg, n_hv))
    c = next((e for e in capi if isinstance(e.get("Machine"), dict) and "v" in e), None)
    h = next((e for e in reversed(hv) if e.get("event") == "hook"
              and e.get("hook") == "UpdateMachine" and isinstance(e.get("Machine"), dict)), None)
    if not check(c is not None, "CAPI's log has a line about a Machine") or \
            not check(h is not None, "hvupdater's log has an UpdateMachine line about a Machine"):
        return 1
    print("     CAPI:      " + json.dumps(c)[:700])
    print("     hvupdater: " + json.dumps(h)[:700])
    t_now = time.time() * 1e3 + 1e3
    for who, e in (("CAPI", c), ("hvupdater", h)):
        check(is_num(e.get("ts")) and t_start <= e["ts"] <= t_now,
              "%s: ts is a number of milliseconds since the epoch within this lab run" % who,
              "%r not in [%.0f, %.0f]" % (e.get("ts"), t_start, t_now))
        check(isinstance(e.get("caller"), str) and CALLER.match(e["caller"]),
              "%s: caller is dir/file:line" % who, e.get("caller"))
        check(isinstance(e.get("msg"), str) and e["msg"] != "", "%s: msg is a string" % who)
        check(is_int(e.get("v")) and e["v"] >= 0, "%s: v is an integer" % who, e.get("v"))
        m = e["Machine"]
        check(list(m) == ["name", "namespace"] and all(isinstance(x, str) and x
                                                       for x in m.values()),
              "%s: Machine is {\"name\",\"namespace\"}" % who, m)
        check("level" not in e, "%s: no level key" % who)
    check(list(c)[:3] == list(h)[:3] == ["ts", "caller", "msg"],
          "both start with ts, caller, msg", "%s / %s" % (list(c)[:3], list(h)[:3]))
    check(list(c).index("Machine") < list(c).index("v") and
          list(h).index("Machine") < list(h).index("v"),
          "in both, the Machine comes before v (CAPI's objects are the logger's context)",
          "%s / %s" % (list(c), list(h)))
    check(abs(c["ts"] - h["ts"]) < 3600e3,
          "the two ts are of the same magnitude (within the hour of this run)",
          "%r vs %r" % (c["ts"], h["ts"]))
    common = [k for k in c if k in h]
    print("     common keys: %s" % ", ".join(common))
    print("     CAPI's only: %s" % ", ".join(k for k in c if k not in h))
    for k in common:
        check(type(c[k]) is type(h[k]) or (is_num(c[k]) and is_num(h[k])),
              "%s has the same JSON type in both (%s)" % (k, type(c[k]).__name__),
              "%r / %r" % (c[k], h[k]))

    # the error shape
    mark = n_hv
    check(refuse_one(hv), "hvupdater refuses a body that is no JSON object (400)")
    hv2, _ = json_lines(HVLOG)
    r = next((e for e in hv2[mark:] if e.get("event") == "hook" and "err" in e), None)
    if check(r is not None, "hvupdater logged the refusal with err"):
        print("     hvupdater: " + json.dumps(r)[:700])
        check(isinstance(r["err"], str) and list(r)[-1] == "err",
              "hvupdater: err is a string, the last key", list(r))
    ce = next((e for e in capi if "err" in e), None)
    if ce is None:
        print("     CAPI's log has no line with err in this run: compared where present")
    else:
        print("     CAPI:      " + json.dumps(ce)[:700])
        # (zap adds errVerbose after err for errors that format a stack, as pkg/errors' do;
        # hvupdater's errors are plain text and have none)
        check(isinstance(ce["err"], str), "CAPI: err is a string", ce.get("err"))
        print("     CAPI's err line: keys %s; v %s" % (", ".join(ce), "v" in ce and ce["v"]))
        if r is not None:
            check(type(ce["err"]) is type(r["err"]), "err has the same JSON type in both")
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
