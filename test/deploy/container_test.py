#!/usr/bin/env python3
"""container_test.py: the Containerfile's build stage, run for real without an image builder.

  container_test.py --source DIR --work DIR

Runs deploy/container/build-steps.sh with the arguments the Containerfile gives it, the
source and output directories moved into a scratch directory, then checks what the runtime
stage takes from it: every `COPY --from=build` source exists in the staged output, the
ENTRYPOINT binary is among them and runs, and the runtime stage's packages provide every
shared library the Release binary needs. What cannot be checked here: the base images and
apt inside them (no container engine runs on this machine).
"""

import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hvdeploy as hv  # noqa: E402
import deploy_test as dt  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    src, work = os.path.abspath(a.source), os.path.abspath(a.work)
    r = hv.Results()
    stages = dt.containerfile(src)
    if not r.eq(len(stages), 2, "Containerfile has two stages"):
        return r.finish()
    build, run = stages

    # The build stage: COPY . SRC, then RUN build-steps.sh SRC OUT [BUILD].
    copy_dest = None
    for cp in build["COPY"]:
        parts = cp.split()
        if parts[:1] == ["."]:
            copy_dest = parts[-1]
    steps = [x for x in build["RUN"] if "build-steps.sh" in x]
    if not r.eq(len(steps), 1, "build stage runs build-steps.sh once"):
        return r.finish()
    words = shlex.split(steps[0])
    i = next(k for k, w in enumerate(words) if w.endswith("build-steps.sh"))
    script, sargs = words[i], words[i + 1:]
    r.check(copy_dest and script.startswith(copy_dest.rstrip("/") + "/"),
            f"the script runs from the copied source ({copy_dest})", script)
    r.check(len(sargs) >= 2 and sargs[0] == copy_dest,
            "build-steps.sh gets the copied source as SRC", sargs)
    out_in_image = sargs[1] if len(sargs) > 1 else "/out"

    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    out = os.path.join(work, "out")
    bdir = os.path.join(work, "build")
    script_here = os.path.join(src, os.path.relpath(script, copy_dest))
    cmd = [script_here, src, out, bdir]
    print("note: running " + " ".join(cmd), flush=True)
    with open(os.path.join(work, "build-steps.log"), "w") as log:
        p = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, timeout=1700)
    logtext = open(os.path.join(work, "build-steps.log")).read()
    if not r.check(p.returncode == 0, "build-steps.sh succeeds", logtext[-3000:]):
        return r.finish()

    # What the runtime stage copies exists in the staged output.
    entry = run["ENTRYPOINT"] or []
    copied_to = {}
    for cp in run["COPY"]:
        parts = cp.split()
        if not r.check(parts[0] == "--from=build" and len(parts) == 3,
                       f"runtime COPY --from=build SRC DEST: {cp}"):
            continue
        s, d = parts[1], parts[2]
        r.check(s.startswith(out_in_image.rstrip("/") + "/"),
                f"{s} comes from build-steps.sh's OUT ({out_in_image})")
        here = os.path.join(out, os.path.relpath(s, out_in_image))
        r.check(os.path.isfile(here), f"{s} exists after build-steps.sh", here)
        copied_to[d] = here
    binary = copied_to.get(entry[0] if entry else None)
    if not r.check(binary, f"the ENTRYPOINT binary {entry[:1]} is copied from the build stage"):
        return r.finish()
    v = subprocess.run([binary, "version"], capture_output=True, text=True, timeout=30)
    r.check(v.returncode == 0 and hv.source_version(src) in v.stdout,
            "the staged binary runs: version", v.stdout + v.stderr)
    h = subprocess.run([binary, *entry[1:], "--help"], capture_output=True, text=True, timeout=30)
    r.check(h.returncode == 0 and "--tls-cert" in h.stdout,
            f"ENTRYPOINT {entry} --help works", h.stdout[-300:] + h.stderr[-300:])
    if os.geteuid() == 0 and shutil.which("setpriv") and run["USER"]:
        uid, _, gid = run["USER"].partition(":")
        h = subprocess.run(["setpriv", f"--reuid={uid}", f"--regid={gid or uid}",
                            "--clear-groups", binary, "version"], capture_output=True,
                           text=True, timeout=30)
        r.check(h.returncode == 0, f"the staged binary runs as the image's USER {run['USER']}",
                h.stderr[-300:])

    pkgs = dt.runtime_packages(run)
    for so, pkg in sorted(hv.needed_packages(binary).items()):
        r.check(pkg and (pkg in pkgs or pkg in dt.BASE_IMAGE_PACKAGES),
                f"runtime stage provides {so} ({pkg})", sorted(pkgs))
    r.check("Release" in open(os.path.join(bdir, "CMakeCache.txt")).read().split(
        "CMAKE_BUILD_TYPE:STRING=")[1][:8], "build-steps.sh builds Release")
    ign = os.path.join(src, "deploy", "container", "Containerfile.dockerignore")
    r.check(os.path.isfile(ign) and re.search(r"^build\b", open(ign).read(), re.M),
            "the build context leaves local build trees out")
    if not r.failed:
        shutil.rmtree(work, ignore_errors=True)
    return r.finish()


if __name__ == "__main__":
    sys.exit(main())
