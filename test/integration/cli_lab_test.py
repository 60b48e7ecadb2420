#!/usr/bin/env python3
"""cli_lab_test.py: `hvupdater plan` takes its target the way virsh does (issue 20, item 6):
-c/--connect URI, else $LIBVIRT_DEFAULT_URI, else libvirt's default URI (uri_default of the
client's libvirt.conf), and a positional DOMAIN given as a name, an ID or a UUID, before,
between or after the flags; the old --libvirt-uri/--domain/--uuid flags keep working.
Runs against libvirt's test driver (test:///default: domain "test", ID 1, a fixed UUID).

usage: cli_lab_test.py HVUPDATER_BINARY
Prints "ok <case>" or "FAIL <case>: why" per case; exits 1 when any failed.
"""
import os
import subprocess
import sys
import tempfile

URI = "test:///default"
UUID = "6695eb01-f6a4-8304-79aa-97f2502e193f"  # the test driver's domain "test"
WANT = ["--memory-mib", "4096"]


def main():
    binary = os.path.abspath(sys.argv[1])
    failed = passed = 0
    base_env = {k: v for k, v in os.environ.items() if k != "LIBVIRT_DEFAULT_URI"}

    def run(args, env=None, prefix=()):
        return subprocess.run(list(prefix) + [binary, "plan"] + args, capture_output=True,
                              text=True, timeout=60, env=env or base_env)

    def case(name, args, rc=0, out=None, err=None, env=None, prefix=()):
        nonlocal failed, passed
        p = run(args, env, prefix)
        why = []
        if p.returncode != rc:
            why.append(f"exit {p.returncode}, want {rc}")
        if out and out not in p.stdout:
            why.append(f"stdout lacks {out!r}")
        if err and err not in p.stderr:
            why.append(f"stderr lacks {err!r}")
        if why:
            failed += 1
            print(f"FAIL {name}: {'; '.join(why)}\n  stdout: {p.stdout.strip()}\n"
                  f"  stderr: {p.stderr.strip()}")
        else:
            passed += 1
            print(f"ok {name}")

    on = f"VM {UUID} on {URI}:"
    case("-c URI NAME", ["-c", URI, "test"] + WANT, out=on)
    case("--connect URI NAME", ["--connect", URI, "test"] + WANT, out=on)
    case("--connect=URI NAME", [f"--connect={URI}", "test"] + WANT, out=on)
    case("DOMAIN as an ID", ["-c", URI, "1"] + WANT, out=on)
    case("DOMAIN as a UUID", ["-c", URI, UUID] + WANT, out=on)
    case("DOMAIN after the flags", WANT + ["-c", URI, "test"], out=on)
    case("DOMAIN after --", ["-c", URI] + WANT + ["--", "test"], out=on)
    case("memory line", ["-c", URI, "test"] + WANT, out="memory            2048 -> 4096")
    case("LIBVIRT_DEFAULT_URI without -c", ["test"] + WANT, out=on,
         env=dict(base_env, LIBVIRT_DEFAULT_URI=URI))
    case("-c wins over LIBVIRT_DEFAULT_URI", ["-c", URI, "test"] + WANT, out=on,
         env=dict(base_env, LIBVIRT_DEFAULT_URI="test:///nonexistent-file.xml"))
    case("old flags: --libvirt-uri --domain", ["--libvirt-uri", URI, "--domain", "test"] + WANT,
         out=f"VM test on {URI}:")
    case("old flags: --libvirt-uri --uuid", ["--libvirt-uri", URI, "--uuid", UUID] + WANT,
         out=on)
    case("old flags: --domain with LIBVIRT_DEFAULT_URI", ["--domain", "test"] + WANT,
         out=f"VM test on {URI}:", env=dict(base_env, LIBVIRT_DEFAULT_URI=URI))
    case("unknown domain", ["-c", URI, "no-such-domain"] + WANT, rc=1,
         err="no domain with a matching name, ID or UUID 'no-such-domain' on test:///default")
    case("unknown ID", ["-c", URI, "4711"] + WANT, rc=1, err="'4711'")
    case("two domains", ["-c", URI, "test", "other"] + WANT, rc=2, err="one DOMAIN only")
    case("positional and --domain", ["-c", URI, "test", "--domain", "test"] + WANT, rc=2,
         err="give one target")
    case("no domain", ["-c", URI] + WANT, rc=2, err="give one target")
    case("--help names -c", ["--help"], out="-c URI")

    # libvirt's own default: uri_default in the client's libvirt.conf, which libvirt reads
    # from $XDG_CONFIG_HOME/libvirt/ for a user other than root (root's is /etc/libvirt/).
    with tempfile.TemporaryDirectory(prefix="hv-cli-") as tmp:
        os.makedirs(os.path.join(tmp, "libvirt"))
        with open(os.path.join(tmp, "libvirt", "libvirt.conf"), "w", encoding="utf-8") as f:
            f.write(f'uri_default = "{URI}"\n')
        os.chmod(tmp, 0o755)
        os.chmod(os.path.join(tmp, "libvirt"), 0o755)
        os.chmod(os.path.join(tmp, "libvirt", "libvirt.conf"), 0o644)
        env = dict(base_env, HOME=tmp, XDG_CONFIG_HOME=tmp)
        prefix = ()
        if os.geteuid() == 0:
            prefix = ("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups")
        case("libvirt's default URI (uri_default)", ["test"] + WANT, out=on, env=env,
             prefix=prefix)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
