#!/usr/bin/env python3
"""check_hardening.py: read a built hvupdater binary with readelf/objdump and fail when any
of the hardening the build promises is missing (CMakeLists.txt, "Hardening"):

  pie        ELF type DYN with FLAGS_1 PIE
  relro      a GNU_RELRO segment
  now        BIND_NOW (FLAGS) or NOW (FLAGS_1): full RELRO, the GOT read-only after start
  stack      __stack_chk_fail imported (-fstack-protector-strong)
  fortify    at least one __*_chk libc function imported (_FORTIFY_SOURCE)
  noexec     a GNU_STACK segment without the execute bit
  cet        (--cet) our own functions start with endbr64 (-fcf-protection)

usage: check_hardening.py BINARY [--cet] [--no-fortify]
Prints one line per check ("ok name" / "FAIL name: why") and exits 1 when any failed.
"""
import re
import subprocess
import sys


def run(*cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        print(f"FAIL {cmd[0]}: {p.stderr.strip()}")
        sys.exit(1)
    return p.stdout


def main():
    args = sys.argv[1:]
    if not args or args[0].startswith("-"):
        print(__doc__)
        return 2
    binary, cet, fortify = args[0], "--cet" in args, "--no-fortify" not in args
    header = run("readelf", "-hW", binary)
    dynamic = run("readelf", "-dW", binary)
    segments = run("readelf", "-lW", binary)
    symbols = run("readelf", "--dyn-syms", "-W", binary)
    checks = {}
    flags1 = re.search(r"\(FLAGS_1\)\s+Flags:(.*)", dynamic)
    flags1 = flags1.group(1).split() if flags1 else []
    flags = re.search(r"\(FLAGS\)\s+(.*)", dynamic)
    flags = flags.group(1).split() if flags else []
    checks["pie"] = (re.search(r"Type:\s+DYN", header) is not None and "PIE" in flags1,
                     "not a position-independent executable")
    checks["relro"] = ("GNU_RELRO" in segments, "no GNU_RELRO segment")
    checks["now"] = ("BIND_NOW" in flags or "NOW" in flags1,
                     "lazy binding: RELRO is partial (link with -z now)")
    checks["stack"] = (re.search(r"\b__stack_chk_fail\b", symbols) is not None,
                       "__stack_chk_fail not imported: no stack protector")
    if fortify:
        chk = sorted(set(re.findall(r"\b(__\w+_chk)\b", symbols)) - {"__stack_chk_fail"})
        checks["fortify"] = (bool(chk), "no __*_chk function imported: _FORTIFY_SOURCE off")
    stack = [ln for ln in segments.splitlines() if "GNU_STACK" in ln]
    checks["noexec"] = (bool(stack) and not re.search(r"\sRW?E\s", stack[0]),
                        "executable or missing GNU_STACK")
    if cet:
        bad = []
        for fn in ("main", "hv_log", "hv_config_parse"):
            out = run("objdump", "-d", "--no-show-raw-insn", f"--disassemble={fn}", binary)
            body = out.split(f"<{fn}>:", 1)
            first = body[1].strip().splitlines()[0] if len(body) == 2 else ""
            if "endbr64" not in first:
                bad.append(fn)
        checks["cet"] = (not bad, "no endbr64 at the start of " + ", ".join(bad))
    failed = 0
    for name, (good, why) in checks.items():
        print(f"ok {name}" if good else f"FAIL {name}: {why}")
        failed += not good
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
