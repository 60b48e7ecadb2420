#!/usr/bin/env python3
"""run_tutorial.py: run a tutorial's commands exactly as a reader would, and check that they
print what the text promises.

  run_tutorial.py DOC [--binary BIN] [--vcsim BIN] [--lab-probe CMD] [--gone-domain NAME]...
                      [--timeout SECONDS] [--print-script]

The tutorial marks its fenced blocks by their info string:

  ```sh tutorial     commands, run in document order in one fresh `bash` with `set -e`,
                     from the top of the source tree (so variables and functions carry
                     over from block to block, as in the reader's terminal)
  ```text expected   lines the preceding `sh tutorial` block must print (stdout or stderr),
                     each found in the output after the previous one (several may share a line); blank lines
                     are ignored
  ```sh cleanup      run at the end whatever happened (an EXIT trap of the same shell, so it
                     sees the tutorial's variables), errors ignored
  ```sh teardown     like cleanup, but only when --lab-probe failed before the run: the
                     tutorial started the shared lab itself, so it stops it too; a lab that
                     was already running (CI, another test) is left alone
  ```sh              anything else is prose for the reader and is not run

The environment gets BUILD (the directory of --binary; the tutorials start with
`BUILD=${BUILD:-$PWD/build}`) and, with --vcsim, HV_VCSIM_BIN. The shell runs in its own
process group: whatever the tutorial started and did not stop (a server, a simulator) is a
failure, and is killed. --gone-domain names libvirt domains (qemu:///system) that must not
exist after cleanup.

Prints `ok`/`FAIL` per block and check, the output of a failing block, and
`N passed, N failed`; exits 1 when anything failed.
"""
import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
FENCE = re.compile(r"^(\s*)(`{3,})\s*([^`]*)$")
BEGIN = "@@HVTUT-BEGIN %d@@"
END = "@@HVTUT-END %d@@"
CLEANUP = "@@HVTUT-CLEANUP@@"


class Block:
    def __init__(self, kind, text, line):
        self.kind, self.text, self.line = kind, text, line
        self.expected = []

    def title(self):
        first = next((ln for ln in self.text.splitlines()
                      if ln.strip() and not ln.strip().startswith("#")), "")
        return "line %d: %s" % (self.line, first.strip()[:70])


def parse(doc_text):
    """The doc's run blocks (with their expectations), cleanup and teardown texts."""
    blocks, cleanup, teardown = [], [], []
    lines = doc_text.splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, info = m.group(1), m.group(2), m.group(3).split()
        body, j = [], i + 1
        while j < len(lines) and not (lines[j].strip().startswith(fence) and
                                      lines[j].strip().strip("`") == ""):
            body.append(lines[j][len(indent):] if lines[j].startswith(indent) else lines[j])
            j += 1
        text = "\n".join(body) + "\n"
        tag = info[1] if len(info) > 1 else ""
        if info[:1] == ["sh"] and tag == "tutorial":
            blocks.append(Block("run", text, i + 1))
        elif info[:1] == ["text"] and tag == "expected":
            if not blocks:
                raise ValueError("line %d: an expected block before any tutorial block" % (i + 1))
            blocks[-1].expected += [ln.strip() for ln in body if ln.strip()]
        elif info[:1] == ["sh"] and tag == "cleanup":
            cleanup.append(text)
        elif info[:1] == ["sh"] and tag == "teardown":
            teardown.append(text)
        i = j + 1
    return blocks, cleanup, teardown


def script(blocks, cleanup, teardown, owns_lab):
    out = ["set -e", "__hvtut_cleanup() {", "set +e", "echo '%s'" % CLEANUP]
    for text in cleanup + (teardown if owns_lab else []):
        out.append(text)
    out += [":", "}", "trap __hvtut_cleanup EXIT", "trap 'exit 143' TERM INT HUP"]
    for n, b in enumerate(blocks):
        out.append("echo '%s'" % (BEGIN % n))
        out.append(b.text)
        out.append("echo '%s'" % (END % n))
    return "\n".join(out) + "\n"


def split_output(text, n_blocks):
    """{block index: output text} for blocks that started, and the cleanup output."""
    outs, cleanup = {}, ""
    for n in range(n_blocks):
        b = text.find(BEGIN % n)
        if b < 0:
            break
        b = text.index("\n", b) + 1
        e = text.find(END % n, b)
        if e < 0:
            e = text.find(CLEANUP, b)
            outs[n] = (text[b:] if e < 0 else text[b:e], False)
            break
        outs[n] = (text[b:e], True)
    c = text.find(CLEANUP)
    if c >= 0:
        cleanup = text[c + len(CLEANUP):]
    return outs, cleanup


def missing_expectations(expected, output):
    """The expected texts not found in the output in this order (several may sit on one
    output line; none spans lines, since each is one line of the expected block)."""
    at, missing = 0, []
    for want in expected:
        k = output.find(want, at)
        if k < 0:
            missing.append(want)
        else:
            at = k + len(want)
    return missing


def group_alive(pgid):
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("doc")
    ap.add_argument("--binary", default=os.path.join(ROOT, "build", "hvupdater"))
    ap.add_argument("--vcsim", default=os.environ.get("HV_VCSIM_BIN"))
    ap.add_argument("--lab-probe", help="shell command that succeeds when the lab is up")
    ap.add_argument("--gone-domain", action="append", default=[])
    ap.add_argument("--timeout", type=int, default=900)
    ap.add_argument("--print-script", action="store_true")
    a = ap.parse_args(argv)

    blocks, cleanup, teardown = parse(open(a.doc).read())
    owns_lab = False
    if a.lab_probe:
        owns_lab = subprocess.run(a.lab_probe, shell=True, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL).returncode != 0
    text = script(blocks, cleanup, teardown, owns_lab)
    if a.print_script:
        sys.stdout.write(text)
        return 0
    passed = failed = 0

    def report(ok, what, detail=""):
        nonlocal passed, failed
        if ok:
            passed += 1
            print("ok " + what)
        else:
            failed += 1
            print("FAIL " + what)
            if detail:
                print("     | " + "\n     | ".join(detail.rstrip("\n").splitlines()[-60:]))

    if not blocks:
        report(False, "%s has no ```sh tutorial blocks" % a.doc)
        print("%d passed, %d failed" % (passed, failed))
        return 1
    env = dict(os.environ)
    env["BUILD"] = os.path.dirname(os.path.abspath(a.binary))
    if a.vcsim:
        env["HV_VCSIM_BIN"] = os.path.abspath(a.vcsim)
    print("running %d blocks of %s (lab %s)" % (
        len(blocks), os.path.relpath(a.doc, ROOT),
        "started by the tutorial: teardown runs" if owns_lab else "already up: left running"
        if a.lab_probe else "not probed"))
    sys.stdout.flush()
    with tempfile.TemporaryDirectory(prefix="hv-tutorial-run-") as tmp:
        path = os.path.join(tmp, "tutorial.sh")
        with open(path, "w") as f:
            f.write(text)
        log_path = os.path.join(tmp, "output")
        t0 = time.monotonic()
        with open(log_path, "w") as log:
            proc = subprocess.Popen(["bash", path], cwd=ROOT, env=env, stdin=subprocess.DEVNULL,
                                    stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True)
            pgid = proc.pid
            try:
                rc = proc.wait(timeout=a.timeout)
                timed_out = False
            except subprocess.TimeoutExpired:
                timed_out = True
                # TERM the whole group: the running command stops, bash's TERM trap exits,
                # and its EXIT trap runs the cleanup blocks
                os.killpg(pgid, signal.SIGTERM)
                try:
                    rc = proc.wait(timeout=120)
                except subprocess.TimeoutExpired:
                    os.killpg(pgid, signal.SIGKILL)
                    rc = proc.wait()
        output = open(log_path, errors="replace").read()
        took = time.monotonic() - t0
        leftovers = ""
        if group_alive(pgid):
            leftovers = subprocess.run(["ps", "-o", "pid,args", "-g", str(pgid)],
                                       capture_output=True, text=True).stdout
            os.killpg(pgid, signal.SIGTERM)
            time.sleep(1)
            if group_alive(pgid):
                os.killpg(pgid, signal.SIGKILL)

    outs, cleanup_out = split_output(output, len(blocks))
    for n, b in enumerate(blocks):
        if n not in outs:
            report(False, "block %s: never ran (an earlier block failed)" % b.title())
            continue
        out, finished = outs[n]
        if not finished:
            why = "timed out after %d s" % a.timeout if timed_out else "exit status %d" % rc
            report(False, "block %s: stopped the tutorial (%s)" % (b.title(), why), out)
            continue
        missing = missing_expectations(b.expected, out)
        report(not missing, "block %s%s" % (
            b.title(), "" if not b.expected else " (%d expected lines)" % len(b.expected)),
            "" if not missing else "missing, in order: %s\noutput:\n%s" % (missing, out))
    report(rc == 0, "the tutorial ran to its end with status 0 (%.0f s)" % took,
           "" if rc == 0 else "cleanup output:\n" + cleanup_out)
    report(not leftovers, "nothing left running after cleanup",
           "left behind (now killed):\n" + leftovers)
    for dom in a.gone_domain:
        if owns_lab:  # teardown ran test/lab/libvirt-down.sh: every hvt-* domain went with it
            names = domain_names(1)
            if names is None:
                report(True, "domain %s removed (the lab itself was stopped)" % dom)
                continue
        else:
            names = domain_names()
        report(names is not None and dom not in names, "domain %s removed by cleanup (%s)" % (
            dom, "libvirtd did not answer" if names is None else
            "still defined: now removed" if dom in names else "gone"))
        if names is None or dom in names:
            remove_domain(dom)
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


def domain_names(tries=30):
    """Names of every domain on qemu:///system, or None when libvirtd does not answer (it
    may be restarting: other lab users restart it), after retrying for about tries s."""
    for _ in range(tries):
        r = subprocess.run(["virsh", "-c", "qemu:///system", "list", "--all", "--name"],
                           capture_output=True, text=True)
        if r.returncode == 0:
            return r.stdout.split()
        time.sleep(1)
    return None


def remove_domain(dom):
    for _ in range(30):
        subprocess.run(["virsh", "-c", "qemu:///system", "destroy", dom], capture_output=True)
        subprocess.run(["virsh", "-c", "qemu:///system", "undefine", dom], capture_output=True)
        names = domain_names(1)
        if names is not None and dom not in names:
            return
        time.sleep(1)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
