#!/usr/bin/env python3
"""deb_test.py: build the Debian package with CPack, install it on this system, run the
unit's ExecStart as the packaged user, and purge it again.

  deb_test.py --source DIR --build DIR --work DIR

Needs root (dpkg -i into the real system; CI runs as root) and exits 77 (skipped) without
it. An hvupdater package already installed (or a /etc/hvupdater left without one) does not
stop it: the installed package is saved first (repacked from dpkg's own record of it, its
conffiles as they are now, and /etc/hvupdater archived whole), purged, and installed and
restored again at the end; the test fails if that cannot be done or did not leave the same
version installed.
There is no systemd PID 1 here, so the unit's command line is run directly, as its User=
with the unit's STATE_DIRECTORY/CONFIGURATION_DIRECTORY set, plus --listen 127.0.0.1:0
and --port-file; the sandbox directives are checked with systemd-analyze when installed.
"""

import argparse
import glob
import grp
import os
import pwd
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hvdeploy as hv  # noqa: E402

PKG = "hvupdater"
USER = "hvupdater"
SAN = "deb-test.hvupdater.invalid"
FILES = {
    "/usr/bin/hvupdater": 0o755,
    "/lib/systemd/system/hvupdater.service": 0o644,
    "/etc/hvupdater/config.json": 0o644,
    "/etc/default/hvupdater": 0o644,
    "/usr/share/man/man1/hvupdater.1.gz": 0o644,
    "/usr/share/doc/hvupdater/copyright": 0o644,
}


def run(cmd, **kw):
    kw.setdefault("capture_output", True)
    kw.setdefault("text", True)
    kw.setdefault("timeout", 600)
    return subprocess.run(cmd, **kw)


def installed():
    p = run(["dpkg-query", "-W", "-f=${Status}", PKG])
    return p.returncode == 0 and "install ok installed" in p.stdout


def user_exists(name):
    try:
        pwd.getpwnam(name)
        return True
    except KeyError:
        return False


def group_exists(name):
    try:
        grp.getgrnam(name)
        return True
    except KeyError:
        return False


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", required=True)
    ap.add_argument("--build", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    src, build = os.path.abspath(a.source), os.path.abspath(a.build)

    if os.geteuid() != 0:
        print("skip: needs root (dpkg -i into this system)")
        return hv.SKIP
    for tool in ("dpkg", "dpkg-deb", "cpack", "setpriv"):
        if not shutil.which(tool):  # a missing tool is a failure, never a skip
            print(f"FAIL: {tool} not installed (scripts/bootstrap.sh installs it)")
            return 1
    r = hv.Results()
    os.makedirs(a.work, exist_ok=True)
    work = tempfile.mkdtemp(prefix="hv-deb-", dir="/tmp")  # reachable by the service user
    os.chmod(work, 0o755)
    saved = save_existing(r, work)
    if saved is None:
        return r.finish()
    user_before = user_exists(USER)
    group_before = group_exists(USER)
    # postinst adds the user to group libvirt when libvirt-daemon-system made it; without
    # that package here, a stand-in group lets the test see that branch run.
    libvirt_made = False
    if not group_exists("libvirt"):
        libvirt_made = run(["groupadd", "--system", "libvirt"]).returncode == 0
        print(f"note: stand-in group libvirt {'created' if libvirt_made else 'NOT created'}")
    try:
        deb = build_package(r, build, work)
        if deb:
            check_package(r, src, build, deb)
            install_and_run(r, src, deb, work)
    finally:
        if installed():
            p = run(["dpkg", "--purge", PKG])
            r.check(p.returncode == 0, "cleanup: dpkg --purge", p.stderr[-500:])
        # The package keeps its system user on purge (Debian practice); a test leaves the
        # system as it found it.
        if not user_before and user_exists(USER):
            run(["userdel", USER])
        if not group_before and group_exists(USER):
            run(["groupdel", USER])
        if libvirt_made:
            run(["groupdel", "libvirt"])
        restore_existing(r, saved)
        if not r.failed:
            shutil.rmtree(work, ignore_errors=True)
    return r.finish()


def save_existing(r, work):
    """What this system has of hvupdater before the test: {"deb": repacked package or None,
    "version": its version, "etc": archive of /etc/hvupdater or None}. The package is purged
    and /etc/hvupdater moved out of the way. None (a failed check) when it cannot be saved."""
    saved = {"deb": None, "version": None, "etc": None}
    if installed():
        saved["version"] = run(["dpkg-query", "-W", "-f=${Version}", PKG]).stdout.strip()
        saved["deb"] = repack_installed(r, work)
        if not saved["deb"]:
            return None
        print(f"note: hvupdater {saved['version']} was installed: saved as {saved['deb']}")
    if os.path.exists("/etc/hvupdater"):
        saved["etc"] = os.path.join(work, "etc-hvupdater.tar")
        p = run(["tar", "-C", "/etc", "-cpf", saved["etc"], "hvupdater"])
        if not r.check(p.returncode == 0, "archive the existing /etc/hvupdater", p.stderr):
            return None
    if saved["deb"]:
        p = run(["dpkg", "--purge", PKG], env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
        if not r.check(p.returncode == 0, "purge the saved package", p.stdout + p.stderr):
            restore_existing(r, saved)
            return None
    if os.path.exists("/etc/hvupdater"):  # left without a package (or not a conffile)
        shutil.rmtree("/etc/hvupdater")
    return saved


def restore_existing(r, saved):
    """Put back what save_existing saved: the package, then /etc/hvupdater as it was."""
    if saved["deb"]:
        p = run(["dpkg", "-i", saved["deb"]],
                env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
        r.check(p.returncode == 0, "reinstall the saved package", (p.stdout + p.stderr)[-800:])
        v = run(["dpkg-query", "-W", "-f=${Version}", PKG]).stdout.strip()
        r.eq(v, saved["version"], "the saved version is installed again")
    if saved["etc"]:
        shutil.rmtree("/etc/hvupdater", ignore_errors=True)
        p = run(["tar", "-C", "/etc", "-xpf", saved["etc"]])
        r.check(p.returncode == 0, "/etc/hvupdater restored as it was", p.stderr)


def repack_installed(r, work):
    """The installed package as a .deb, built from dpkg's record of it: its control fields,
    maintainer scripts, conffiles list and files as they are on disk now (dpkg-repack's
    method). Returns the path, or None with a failed check."""
    info = "/var/lib/dpkg/info"
    lst = next((os.path.join(info, f) for f in (f"{PKG}.list", f"{PKG}:amd64.list",
                                                 f"{PKG}:arm64.list")
                if os.path.exists(os.path.join(info, f))), None)
    if not r.check(lst is not None, f"dpkg's file list of the installed {PKG}"):
        return None
    stem = lst[:-len(".list")]
    root = os.path.join(work, "repack")
    os.makedirs(os.path.join(root, "DEBIAN"))
    for path in open(lst).read().splitlines():
        if path in ("", "/.", "/"):
            continue
        dst = root + path
        if os.path.isdir(path):  # also /lib, a link to usr/lib on a merged-/usr system
            os.makedirs(dst, exist_ok=True)
            shutil.copystat(path, dst)
        elif os.path.islink(path):
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            os.symlink(os.readlink(path), dst)
        elif os.path.isfile(path):
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            shutil.copy2(path, dst)
    for script in ("preinst", "postinst", "prerm", "postrm", "config", "templates",
                   "conffiles", "triggers", "shlibs"):
        if os.path.exists(f"{stem}.{script}"):
            shutil.copy2(f"{stem}.{script}", os.path.join(root, "DEBIAN", script))
    status = run(["dpkg-query", "-s", PKG]).stdout
    control, skip = [], False
    for line in status.splitlines():
        if line[:1] in (" ", "\t"):
            if not skip:
                control.append(line)
            continue
        skip = line.split(":", 1)[0] in ("Status", "Conffiles", "Config-Version")
        if not skip:
            control.append(line)
    with open(os.path.join(root, "DEBIAN", "control"), "w") as f:
        f.write("\n".join(control) + "\n")
    deb = os.path.join(work, f"{PKG}-saved.deb")
    p = run(["dpkg-deb", "--root-owner-group", "-b", root, deb])
    if not r.check(p.returncode == 0, "repack the installed package", p.stdout + p.stderr):
        return None
    return deb


def build_package(r, build, work):
    cfg = os.path.join(build, "CPackConfig.cmake")
    if not r.check(os.path.isfile(cfg), "CPackConfig.cmake exists (cmake/Packaging.cmake)"):
        return None
    out = os.path.join(work, "pkg")
    p = run(["cpack", "-G", "DEB", "--config", cfg, "-B", out], cwd=build)
    r.check(p.returncode == 0, "cpack -G DEB", (p.stdout + p.stderr)[-1500:])
    debs = glob.glob(os.path.join(out, "*.deb"))
    if not r.eq(len(debs), 1, "cpack made one .deb"):
        return None
    print(f"note: {debs[0]}")
    return debs[0]


def check_package(r, src, build, deb):
    info = run(["dpkg-deb", "-f", deb]).stdout
    fields = dict(re.findall(r"^([A-Za-z-]+): (.*)$", info, re.M))
    r.eq(fields.get("Package"), PKG, "Package field")
    r.eq(fields.get("Version"), hv.source_version(src), "Version is the project version")
    depends = {d.strip().split(" ")[0] for d in fields.get("Depends", "").split(",") if d.strip()}
    print(f"note: Depends: {fields.get('Depends')}")
    r.check("adduser" in depends, "Depends on adduser (postinst creates the user)")
    binary = os.path.join(build, "hvupdater")
    for so, pkg in sorted(hv.needed_packages(binary).items()):
        if re.match(r"^lib(asan|ubsan|lsan|tsan)\.", so):
            continue
        r.check(pkg and pkg in depends, f"Depends covers {so} ({pkg})", sorted(depends))
    listing = run(["dpkg-deb", "-c", deb]).stdout
    for path in FILES:
        r.check(re.search(r"\s\." + re.escape(path) + r"$", listing, re.M),
                f"package holds {path}")
    ctrl = os.path.join(os.path.dirname(deb), "control")
    shutil.rmtree(ctrl, ignore_errors=True)
    run(["dpkg-deb", "-e", deb, ctrl], check=True)
    r.eq(open(os.path.join(ctrl, "conffiles")).read().split(),
         ["/etc/hvupdater/config.json", "/etc/default/hvupdater"],
         "conffiles holds the config and /etc/default/hvupdater")
    for script in ("postinst", "prerm", "postrm"):
        p = os.path.join(ctrl, script)
        r.check(os.path.isfile(p) and os.stat(p).st_mode & 0o111, f"{script} is in the package "
                "and executable")
        if os.path.isfile(p):
            sh = run(["sh", "-n", p])
            r.check(sh.returncode == 0, f"{script} is valid sh", sh.stderr)


def unit_exec(unit_path):
    unit = hv.parse_unit(unit_path)
    return unit, shlex.split(hv.unit_get(unit, "Service", "ExecStart")[-1].lstrip("-@+!:"))


def install_and_run(r, src, deb, work):
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    p = run(["dpkg", "-i", deb], env=env)
    if not r.check(p.returncode == 0, "dpkg -i", (p.stdout + p.stderr)[-1500:]):
        return
    for path, mode in FILES.items():
        st = os.stat(path) if os.path.exists(path) else None
        r.check(st and stat_mode(st) == mode, f"{path} installed with mode {oct(mode)}",
                oct(stat_mode(st)) if st else "missing")
    with open(os.path.join(src, "deploy", "systemd", "config.json")) as f:
        r.eq(open("/etc/hvupdater/config.json").read(), f.read(),
             "/etc/hvupdater/config.json is deploy/systemd/config.json")
    with open(os.path.join(src, "deploy", "systemd", "hvupdater.default")) as f:
        r.eq(open("/etc/default/hvupdater").read(), f.read(),
             "/etc/default/hvupdater is deploy/systemd/hvupdater.default")
    cf = run(["dpkg-query", "-W", "-f=${Conffiles}", PKG]).stdout
    r.check(re.search(r"^\s*/etc/default/hvupdater [0-9a-f]{32}$", cf, re.M),
            "dpkg registers /etc/default/hvupdater as a conffile", cf)
    # The admin's edit: a SAN for the host name, which the server's certificate must carry.
    with open("/etc/default/hvupdater", "a", encoding="utf-8") as f:
        f.write(f'HVUPDATER_ARGS="--tls-san {SAN}"\n')
    gz = run(["gzip", "-t", "/usr/share/man/man1/hvupdater.1.gz"])
    r.check(gz.returncode == 0, "man page is valid gzip", gz.stderr)
    v = run(["/usr/bin/hvupdater", "version"])
    r.check(v.returncode == 0 and hv.source_version(src) in v.stdout,
            "/usr/bin/hvupdater version runs", v.stdout + v.stderr)

    # The user postinst made.
    if not r.check(user_exists(USER), f"postinst created user {USER}"):
        return
    pw = pwd.getpwnam(USER)
    r.check(pw.pw_uid < 1000, f"{USER} is a system user (uid {pw.pw_uid})")
    r.check(pw.pw_shell in ("/usr/sbin/nologin", "/sbin/nologin", "/bin/false"),
            f"{USER} has no login shell", pw.pw_shell)
    r.check(group_exists(USER) and grp.getgrnam(USER).gr_gid == pw.pw_gid,
            f"{USER}'s primary group is {USER}")
    if group_exists("libvirt"):
        r.check(USER in grp.getgrnam("libvirt").gr_mem, f"{USER} is in group libvirt")
    else:
        print("note: no libvirt group here (libvirt-daemon-system not installed): "
              "membership not checked")
    r.check(not os.path.exists("/var/lib/hvupdater") or
            os.stat("/var/lib/hvupdater").st_uid != 0,
            "postinst leaves the state directory to systemd's StateDirectory=")

    # systemd's own reading of the unit (no PID 1 needed).
    unit_path = "/lib/systemd/system/hvupdater.service"
    sa = shutil.which("systemd-analyze")
    if sa:
        p = run([sa, "verify", unit_path])
        out = (p.stdout + p.stderr).strip()
        r.check(p.returncode == 0 and not out, "systemd-analyze verify: no complaint", out)
        p = run([sa, "security", "--offline=true", "--threshold=25", unit_path])
        score = re.search(r"Overall exposure level for \S+: ([0-9.]+)", p.stdout + p.stderr)
        r.check(p.returncode == 0 and score, "systemd-analyze security: exposure <= 2.5",
                score.group(1) if score else (p.stdout + p.stderr)[-500:])
        if score:
            print(f"note: systemd-analyze security exposure {score.group(1)}")
    else:
        print("note: systemd-analyze not installed: unit not verified by systemd")

    # ExecStart, as systemd would start it: User=/Group= with supplementary groups from the
    # user database, STATE_DIRECTORY made and owned by the user, a port we can find.
    unit, argv = unit_exec(unit_path)
    r.eq(hv.unit_get(unit, "Service", "User")[-1:], [USER], "unit User= is the packaged user")
    envfile = hv.unit_get(unit, "Service", "EnvironmentFile")[-1].lstrip("-")
    argv = hv.expand_exec(argv, hv.parse_env_file(envfile))
    r.check(argv[-2:] == ["--tls-san", SAN],
            f"ExecStart takes HVUPDATER_ARGS from {envfile}", argv)
    state = os.path.join(work, "state")
    os.makedirs(state, mode=0o700)
    os.chown(state, pw.pw_uid, pw.pw_gid)
    port_file = os.path.join(state, "port")
    argv = argv + ["--listen", "127.0.0.1:0", "--port-file", port_file]
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": pw.pw_dir, "USER": USER,
           "LOGNAME": USER, "STATE_DIRECTORY": state,
           "CONFIGURATION_DIRECTORY": "/etc/hvupdater"}
    prefix = ["setpriv", f"--reuid={USER}", f"--regid={USER}", "--init-groups", "--"]
    print("note: running " + " ".join(prefix + argv))
    srv = hv.Server(argv, port_file, os.path.join(work, "unit-server.log"), env=env, cwd="/",
                    prefix=prefix)
    try:
        port = srv.start()
        r.check(True, f"the unit's ExecStart serves as {USER} (port {port})")
        status = open(f"/proc/{srv.proc.pid}/status").read()
        uids = re.search(r"^Uid:\s+(\d+)", status, re.M).group(1)
        groups = set(re.search(r"^Groups:(.*)$", status, re.M).group(1).split())
        r.eq(int(uids), pw.pw_uid, f"the server runs as {USER}")
        if group_exists("libvirt"):
            r.check(str(grp.getgrnam("libvirt").gr_gid) in groups,
                    "the server holds group libvirt (qemu:///system access)", groups)
        ca = os.path.join(state, "tls", "ca.crt")
        r.check(os.path.isfile(ca), "the self-signed CA is in $STATE_DIRECTORY/tls")
        x = run(["openssl", "x509", "-noout", "-ext", "subjectAltName", "-in",
                 os.path.join(state, "tls", "tls.crt")])
        r.check(f"DNS:{SAN}" in x.stdout,
                "the serving certificate carries the --tls-san from /etc/default/hvupdater",
                x.stdout + x.stderr)
        for f in ("ca.crt", "tls.crt", "tls.key"):
            p = os.path.join(state, "tls", f)
            if os.path.exists(p):
                r.eq(os.stat(p).st_uid, pw.pw_uid, f"$STATE_DIRECTORY/tls/{f} owned by {USER}")
        key = os.path.join(state, "tls", "tls.key")
        if os.path.exists(key):
            r.eq(stat_mode(os.stat(key)) & 0o077, 0, "tls.key is private to the user")
        # curl, as an operator would, with the CA the server made.
        curl = run(["curl", "-sS", "--fail", "--cacert", ca,
                    f"https://127.0.0.1:{port}/readyz"], timeout=30)
        r.check(curl.returncode == 0 and curl.stdout.strip() == "ready",
                "curl --cacert $STATE_DIRECTORY/tls/ca.crt https://127.0.0.1/readyz",
                curl.stdout + curl.stderr)
        st, body = hv.https(port, "POST", hv.hook_path("Discovery"), ca,
                            body={"apiVersion": "hooks.runtime.cluster.x-k8s.io/v1alpha1",
                                  "kind": "DiscoveryRequest"})
        r.check(st == 200 and '"Success"' in body, "discovery answers Success", body[:300])
    except Exception as e:  # noqa: BLE001
        r.check(False, "the unit's ExecStart serves", e)
    finally:
        r.eq(srv.stop(), 0, "SIGTERM stops it cleanly")
        if r.failed:
            print(srv.log_text()[-3000:])

    p = run(["dpkg", "--purge", PKG], env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
    r.check(p.returncode == 0, "dpkg --purge", (p.stdout + p.stderr)[-800:])
    for path in FILES:
        r.check(not os.path.exists(path), f"purge removed {path}")
    r.check(not os.path.exists("/etc/hvupdater"), "purge removed /etc/hvupdater")
    r.check(not os.path.exists("/etc/default/hvupdater"), "purge removed /etc/default/hvupdater")
    r.check(not installed(), "package no longer installed")


def stat_mode(st):
    return st.st_mode & 0o7777


if __name__ == "__main__":
    sys.exit(main())
