#!/usr/bin/env python3
"""check_claims.py: claims of the operator docs checked against what they describe.

  check_claims.py [ROOT]

1. Supported CAPI versions: every "v1.12" in README.md, docs/*.md and deploy/README.md
   reads as the range v1.12-v1.14 ("v1.12–v1.14", "v1.12 to v1.14", "v1.12 (through
   v1.14)"), and every "lab-tested on vX" is the cluster-api version test/capi/go.mod pins.
2. Logs: no doc shows `kubectl logs deployment/hvupdater` (one pod of two); the quickstart's
   `logs -l LABEL --prefix` selects the Deployment's pod label.
3. The quickstart's image overlay: its kustomization takes ../deploy/kubernetes as a
   resource and renames the image the base Deployment runs, and the overlay is what it
   applies (not deploy/kubernetes, whose image no registry serves).
4. ClusterClass: the quickstart says the CAPI lab does not run it exactly when
   test/capi/up.sh starts CAPI with ClusterTopology=false.
5. docs/how-it-works.md does not say CanUpdate* answers from the request alone
   (CanUpdateMachine probes the VM).
6. The quickstart says which rollout strategies keep every Machine (maxSurge 0, or
   affectsAvailability false) and what CAPI's default did in the lab.

Standard library only. Prints `ok ...` / `FAIL ...` per check and `N passed, N failed`;
exit 1 on any failure.
"""
import glob
import os
import re
import sys


def main(argv):
    root = argv[0] if argv else os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))
    passed = failed = 0

    def report(ok, what):
        nonlocal passed, failed
        passed += bool(ok)
        failed += not ok
        print(("ok " if ok else "FAIL ") + what)

    def read(rel):
        with open(os.path.join(root, rel), encoding="utf-8") as f:
            return f.read()

    docs = {os.path.relpath(p, root): open(p, encoding="utf-8").read()
            for p in [os.path.join(root, "README.md"), os.path.join(root, "deploy", "README.md")]
            + sorted(glob.glob(os.path.join(root, "docs", "*.md")))}
    quick = docs["docs/quickstart.md"]

    # 1. CAPI versions
    gomod = read("test/capi/go.mod")
    m = re.search(r"^\s*sigs\.k8s\.io/cluster-api (v[0-9.]+)", gomod, re.M)
    lab = m.group(1) if m else None
    report(lab, "test/capi/go.mod pins sigs.k8s.io/cluster-api (%s)" % lab)
    for rel, text in docs.items():
        bad = [text[max(0, mm.start() - 30):mm.end() + 20].replace("\n", " ")
               for mm in re.finditer(r"v1\.12(?![0-9])", text)
               if not re.match(r"v1\.12(–v1\.14| to v1\.14| \(through v1\.14\))",
                               text[mm.start():])]
        report(not bad, "%s: every v1.12 reads v1.12-v1.14 %s" % (rel, bad if bad else ""))
        for tested in re.findall(r"lab-tested on (v[0-9.]*[0-9])", text):
            report(tested == lab, "%s: lab-tested on %s is the lab's CAPI %s"
                   % (rel, tested, lab))
    report("lab-tested on %s" % lab in quick, "quickstart names the lab's CAPI version")

    # 2. logs
    dep = read("deploy/kubernetes/base/deployment.yaml")
    m = re.search(r"^  template:\n    metadata:\n      labels:\n((?:        .*\n)+)", dep, re.M)
    pod_labels = dict(re.findall(r"^        ([\w./-]+): (\S+)$", m.group(1), re.M)) if m else {}
    for rel, text in docs.items():
        report(not re.search(r"logs\s+(deployment|deploy)/hvupdater", text),
               "%s: no `kubectl logs deployment/hvupdater` (shows one replica)" % rel)
    sel = re.findall(r"kubectl -n hvupdater-system logs -l (\S+)=(\S+) --prefix", quick)
    report(sel and all(pod_labels.get(k) == v for k, v in sel),
           "quickstart: logs -l ... --prefix selects the pods' label %s (pods: %s)"
           % (sel, pod_labels))

    # 3. the image overlay
    m = re.search(r"cat > ([\w-]+)/kustomization\.yaml <<'EOF'\n(.*?)\n\s*EOF\n", quick, re.S)
    report(m, "quickstart writes an overlay kustomization")
    if m:
        odir, body = m.group(1), m.group(2)
        image = re.search(r"^\s+image: (\S+)$", dep, re.M)
        base_name = image.group(1).rsplit(":", 1)[0] if image else None
        report(re.search(r"resources:\n\s+- \.\./deploy/kubernetes\n", body),
               "the overlay's resource is ../deploy/kubernetes")
        report(re.search(r"images:\n\s+- name: %s\n\s+newName: \S+\n\s+newTag: \S+"
                         % re.escape(base_name or "?"), body),
               "the overlay renames the base Deployment's image %s" % base_name)
        applies = re.findall(r"kubectl apply -k (\S+)", quick)
        report(applies == [odir], "the quickstart applies the overlay %s, nothing else (%s)"
               % (odir, applies))

    # 4. ClusterClass in the lab
    up = read("test/capi/up.sh")
    no_topology = "ClusterTopology=false" in up
    says_not = "does not run ClusterClass" in quick
    report(no_topology == says_not, "quickstart: the CAPI lab %s ClusterClass (up.sh: "
           "ClusterTopology=%s)" % ("does not run" if says_not else "runs",
                                    "false" if no_topology else "on"))
    report("#### Clusters managed by a ClusterClass" in quick,
           "quickstart has a ClusterClass path")

    # 5. how-it-works
    hiw = docs["docs/how-it-works.md"]
    report("CanUpdate* answers from the request alone" not in hiw,
           "how-it-works.md: CanUpdateMachine is not said to answer from the request alone")

    # 6. rollout strategies
    sec = quick.split("#### Which rollout strategies keep every Machine in place", 1)
    body = sec[1].split("\n#### ", 1)[0] if len(sec) == 2 else ""
    for want in ("`maxSurge: 0`, `maxUnavailable: 1`", "`affectsAvailability: false`",
                 "`maxSurge: 1`, `maxUnavailable: 0`", "2 of 3 stayed in place",
                 "on %s" % lab):
        report(want in body, "quickstart's rollout strategies name %s" % want)

    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed or not passed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
