#!/usr/bin/env python3
"""run.py: the simulation as a judge of engine mutations (issue 26 item 3).

Each test/sim/mutations/*.patch is one small engine mutation: a header (Key: value lines)
naming the promise it breaks, then a unified diff against src/engine. For each one this
script copies src/engine to a scratch directory, applies the patch there (the tree is never
touched), compiles the changed engine sources with the build's own compile commands
(compile_commands.json; -Werror dropped: a mutant may leave a variable unused), links them
ahead of the engine library into a copy of sim_main (the build's link line), and runs it over
the CI seeds (1..2000 at 400 steps, then every sim_regression seed at its steps, then every
scripted scenario) until a run breaks. It prints, per mutation, the invariant that caught it, the seed and the step.

Header fields:
  Promise:   the promise the mutation breaks (required)
  Mutation:  what the diff changes (required)
  Expect:    "caught" (default) or "uncaught: <the judge's hole, and the item that closes it>":
             a mutation listed uncaught fails the target when it is caught (take the line out),
             as open-seeds.txt does for seeds
  Guards:    NAME:SEED[:STEPS] (repeatable, comma-separated): sim.regression.NAME must break
             under this mutant (a regression seed re-verified against its fix: issue 26 item 4);
             or NAME of a scripted scenario, test/sim/scripts/NAME.sim (ctest sim.scenario.NAME),
             which must break under it

After the seeds, every scripted scenario (test/sim/scripts/*.sim, sim_main --script: a pinned
schedule, issue 26 item 4) is run too, so a mutant that only a scenario's schedule reaches is
caught.

A patch that no longer applies as a diff (its code moved to another file of src/engine, or
its context changed) is applied by its text: each hunk where its changed lines, with as much
of their context as still matches, occur exactly once in src/engine; it is named for a refresh.
Fails (exit 1) when a patch no longer applies (named: the engine moved; refresh the patch),
a mutant does not build, a mutant expected caught is not, or a Guards seed passes.
  run.py --source SRC --build BUILD [--only NAME[,NAME]] [--seeds N] [--keep]
"""
import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def parse_header(path):
    head = {}
    with open(path) as f:
        for line in f:
            if line.startswith('--- ') or line.startswith('diff '):
                break
            m = re.match(r'^([A-Z][A-Za-z-]*):\s*(.*)$', line)
            if m:
                key = m.group(1)
                head[key] = (head[key] + ' ' if key in head else '') + m.group(2).strip()
                last = key
            elif line.startswith('  ') and head:
                head[last] += ' ' + line.strip()
    return head


def regression_seeds(cmake_lists):
    """(name, seed, steps, extra sim_main arguments) of every sim_regression seed, and of
    every sim_regression_honest one (the world of --honest-capi)."""
    text = open(cmake_lists).read()
    out = []
    for body, honest, steps in re.findall(
            r'foreach\(reg(.*?)\)\s*sim_regression(_honest)?\(\$\{reg\}\s+(\d+)\)', text, re.S):
        for name, seed in re.findall(r'"([^":]+):(\d+)"', body):
            out.append((name, int(seed), int(steps), ['--honest-capi'] if honest else []))
    return out


def compile_cmds(build, engine_dir):
    with open(os.path.join(build, 'compile_commands.json')) as f:
        db = json.load(f)
    out = {}
    for e in db:
        src = os.path.realpath(os.path.join(e['directory'], e['file']))
        if os.path.dirname(src) == os.path.realpath(engine_dir) and src.endswith('.c'):
            args = e.get('arguments') or shlex.split(e['command'])
            out[os.path.basename(src)] = (e['directory'], args, src)
    return out


def patched_files(patch):
    files = []
    with open(patch) as f:
        for line in f:
            m = re.match(r'^\+\+\+ b/src/engine/(\S+)', line)
            if m:
                files.append(m.group(1))
    return files


def hunks(patch):
    """Each hunk of the diff as a list of (tag, line): tag ' ', '-' or '+'."""
    out = []
    cur = None
    with open(patch) as f:
        for line in f:
            if line.startswith('@@'):
                cur = []
                out.append(cur)
            elif line.startswith(('--- ', '+++ ')):
                cur = None
            elif cur is not None and line[:1] in (' ', '-', '+'):
                cur.append((line[0], line[1:]))
    return out


def trim(hunk, before, after):
    """The hunk's old and new text with at most before/after lines of context."""
    first = next(i for i, (t, _) in enumerate(hunk) if t != ' ')
    last = max(i for i, (t, _) in enumerate(hunk) if t != ' ')
    part = hunk[max(0, first - before):last + after + 1]
    return (''.join(l for t, l in part if t in ' -'), ''.join(l for t, l in part if t in ' +'))


def apply_by_text(patch, engine):
    """Applies each hunk where its text occurs exactly once in src/engine (with as much of its
    context as still matches, down to the changed lines alone); returns the files changed, or
    (None, why)."""
    texts = {f: open(os.path.join(engine, f)).read() for f in os.listdir(engine)
             if f.endswith(('.c', '.h'))}
    changed = []
    for h in hunks(patch):
        done = False
        n = len(h)
        for before, after in sorted(((b, a) for b in range(n + 1) for a in range(n + 1)),
                                    key=lambda x: -(x[0] + x[1])):
            old, new = trim(h, before, after)
            where = [f for f, t in texts.items() if old in t]
            if len(where) == 1 and texts[where[0]].count(old) == 1:
                f = where[0]
                texts[f] = texts[f].replace(old, new)
                if f not in changed:
                    changed.append(f)
                done = True
                break
        if not done:
            return None, 'its changed lines are not in src/engine exactly once'
    for f in changed:
        with open(os.path.join(engine, f), 'w') as out:
            out.write(texts[f])
    return changed, ''


def run(cmd, cwd=None, timeout=None):
    return subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=timeout)


def build_mutant(name, patch, args, cmds, work):
    """Returns (binary, None) or (None, why)."""
    engine = os.path.join(args.source, 'src', 'engine')
    tree = os.path.join(work, name)
    shutil.rmtree(tree, ignore_errors=True)
    os.makedirs(os.path.join(tree, 'src'))
    shutil.copytree(engine, os.path.join(tree, 'src', 'engine'))
    # "=== alternative" lines separate diffs of the same mutation for other shapes of the
    # engine (before and after a refactor): the first that applies is taken
    sections = re.split(r'^=== alternative.*\n', open(patch).read(), flags=re.M)
    for n, text in enumerate(sections):
        part = os.path.join(work, '%s.%d.diff' % (name, n))
        with open(part, 'w') as out:
            out.write(text)
        r = run(['patch', '-p1', '-F1', '--no-backup-if-mismatch', '-s', '--dry-run', '-d', tree,
                 '-i', part])
        if r.returncode == 0 or n + 1 == len(sections):
            break
        moved, _ = apply_by_text(part, os.path.join(tree, 'src', 'engine'))
        if moved:
            print('     %-40s applied alternative %d by its text' % (name, n), flush=True)
            r.returncode = 0
            patch = None
            files = moved
            break
    if patch is not None:
        patch = part
        r = run(['patch', '-p1', '-F1', '--no-backup-if-mismatch', '-s', '-d', tree, '-i', patch])
        files = patched_files(patch)
    if r.returncode != 0:
        # The code may have moved to another file of src/engine unchanged (a split): apply
        # each hunk by its text where that text is now, if it is there exactly once.
        shutil.rmtree(os.path.join(tree, 'src', 'engine'))
        shutil.copytree(engine, os.path.join(tree, 'src', 'engine'))
        moved, why = apply_by_text(patch, os.path.join(tree, 'src', 'engine'))
        if moved is None:
            return None, 'patch no longer applies (refresh it against today\'s src/engine): ' + \
                r.stdout.strip().replace('\n', '; ')[:200] + '; by its text: ' + why
        print('     %-40s applied by its text in %s (the diff names %s: refresh it)' %
              (name, ', '.join(moved), ', '.join(files)), flush=True)
        files = moved
    if not files:
        return None, 'the patch names no file under src/engine'
    if any(not f.endswith('.c') for f in files):  # a header: every engine source sees it
        files = sorted(cmds)
    objs = []
    for f in files:
        if f not in cmds:
            return None, 'no compile command for src/engine/%s in compile_commands.json' % f
        directory, argv, src = cmds[f]
        obj = os.path.join(tree, f + '.o')
        new = []
        skip = False
        for a in argv:
            if skip:
                skip = False
                continue
            if a in ('-o', '-MF', '-MT', '-MQ'):
                skip = True
                continue
            if a in ('-Werror', '-MD', '-MMD', '-c') or os.path.realpath(
                    os.path.join(directory, a)) == src:
                continue
            new.append(a)
        new += ['-w', '-c', os.path.join(tree, 'src', 'engine', f), '-o', obj]
        r = run(new, cwd=directory)
        if r.returncode != 0:
            return None, 'the mutant does not compile (%s): %s' % (f, r.stdout.strip()[:400])
        objs.append(obj)
    simdir = os.path.join(args.build, 'test', 'sim')
    link = os.path.join(simdir, 'CMakeFiles', 'sim_main.dir', 'link.txt')
    if not os.path.exists(link):
        return None, 'no %s (the runner links from a Makefile build\'s link line)' % link
    argv = shlex.split(open(link).read())
    binary = os.path.join(tree, 'sim_main_' + name)
    out = []
    k = 0
    while k < len(argv):
        a = argv[k]
        if a == '-o':
            out += ['-o', binary]
            k += 2
            continue
        out.append(a)
        if a.endswith('sim_main.c.o'):
            out += objs
        k += 1
    r = run(out, cwd=simdir)
    if r.returncode != 0:
        return None, 'the mutant does not link: ' + r.stdout.strip()[:400]
    return binary, None


BROKE = re.compile(r'^seed (\d+): (\S+) broken at step (\d+): (.*)$', re.M)
ABORTED = re.compile(r'sim: the engine aborted seed (\d+) .* at step (\d+)')


SKIP = os.path.join(os.path.dirname(HERE), 'open-seeds.txt')
SCRIPTS = os.path.join(os.path.dirname(HERE), 'scripts')


def scenarios():
    """{name: path} of every scripted scenario (test/sim/scripts/NAME.sim)."""
    if not os.path.isdir(SCRIPTS):
        return {}
    return {f[:-4]: os.path.join(SCRIPTS, f) for f in sorted(os.listdir(SCRIPTS))
            if f.endswith('.sim')}


def judge(binary, cmd):
    """(invariant, seed, step, why) of the first break, or None. The seeds open-seeds.txt
    lists (they break on the engine as it is) are skipped: they catch nothing."""
    try:
        r = run([binary] + cmd + ['--quiet', '--first-break', '--skip-file', SKIP], timeout=1200)
    except subprocess.TimeoutExpired:
        return ('timeout', '?', '?', 'the mutant ran past 20 minutes')
    m = BROKE.search(r.stdout)
    if m:
        return (m.group(2), m.group(1), m.group(3), m.group(4))
    m = ABORTED.search(r.stdout)
    if m:
        line = [x for x in r.stdout.splitlines() if 'illegal phase move' in x or 'abort' in x]
        return ('engine-abort', m.group(1), m.group(2), (line[0] if line else '')[:200])
    if r.returncode not in (0, 1):
        return ('crash', '?', '?', 'sim_main exited with %d: %s' % (r.returncode,
                                                                  r.stdout.strip()[-200:]))
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--source', required=True)
    ap.add_argument('--build', required=True)
    ap.add_argument('--only', default='')
    ap.add_argument('--seeds', type=int, default=2000)
    ap.add_argument('--keep', action='store_true')
    args = ap.parse_args()
    args.source = os.path.abspath(args.source)
    args.build = os.path.abspath(args.build)
    patches = sorted(f for f in os.listdir(HERE) if f.endswith('.patch'))
    if args.only:
        want = set(args.only.split(','))
        patches = [p for p in patches if p[:-6] in want]
    if not patches:
        print('sim-mutations: no mutation to run')
        return 1
    cmds = compile_cmds(args.build, os.path.join(args.source, 'src', 'engine'))
    regs = regression_seeds(os.path.join(args.source, 'test', 'sim', 'CMakeLists.txt'))
    reg_by_name = {n: (s, st, x) for n, s, st, x in regs}
    work = tempfile.mkdtemp(prefix='sim-mutations.')
    t0 = time.time()
    bad = []
    rows = []
    for p in patches:
        name = p[:-6]
        path = os.path.join(HERE, p)
        head = parse_header(path)
        t1 = time.time()
        if 'Promise' not in head or 'Mutation' not in head:
            bad.append('%s: the header names no Promise or no Mutation' % name)
            continue
        expect = head.get('Expect', 'caught')
        binary, why = build_mutant(name, path, args, cmds, work)
        if not binary:
            bad.append('%s: %s' % (name, why))
            print('FAIL %-40s %s' % (name, why), flush=True)
            continue
        hit = judge(binary, ['--from', '1', '--seeds', str(args.seeds), '--steps', '400'])
        where = 'seeds 1..%d x400' % args.seeds
        if not hit:
            for rn, rs, rst, rx in regs:
                if rst == 400 and rs <= args.seeds and not rx:
                    continue  # (run above)
                hit = judge(binary, ['--seed', str(rs), '--steps', str(rst)] + rx)
                if hit:
                    where = 'sim.regression.%s' % rn
                    break
        if not hit:
            for sn, sp in scenarios().items():
                hit = judge(binary, ['--script', sp])
                if hit:
                    where = 'sim.scenario.%s' % sn
                    break
        guards_ok = []
        for g in [x.strip() for x in head.get('Guards', '').split(',') if x.strip()]:
            gp = g.split(':')
            gname = gp[0]
            if len(gp) == 1 and gname in scenarios():
                gh = judge(binary, ['--script', scenarios()[gname]])
                if gh:
                    guards_ok.append('sim.scenario.%s (%s at step %s)' % (gname, gh[0], gh[2]))
                else:
                    bad.append('%s: sim.scenario.%s no longer breaks under its mutant: it guards '
                               'nothing' % (name, gname))
                continue
            gx = reg_by_name[gname][2] if gname in reg_by_name else []
            if len(gp) >= 2:
                gseed, gsteps = int(gp[1]), int(gp[2]) if len(gp) > 2 else 400
            elif gname in reg_by_name:
                gseed, gsteps, gx = reg_by_name[gname]
            else:
                bad.append('%s: Guards names %s, not a sim_regression seed' % (name, gname))
                continue
            gh = judge(binary, ['--seed', str(gseed), '--steps', str(gsteps)] + gx)
            if gh:
                guards_ok.append('%s (seed %d: %s at step %s)' % (gname, gseed, gh[0], gh[2]))
            else:
                bad.append('%s: sim.regression.%s (seed %d) no longer breaks under its mutant: '
                           'it guards nothing' % (name, gname, gseed))
        dt = time.time() - t1
        if hit:
            desc = '%s (seed %s, step %s, %s): %s' % (hit[0], hit[1], hit[2], where, hit[3][:160])
            if expect.startswith('uncaught'):
                bad.append('%s: listed uncaught but caught now by %s: take the Expect line out'
                           % (name, hit[0]))
                print('FAIL %-40s caught by %s, listed uncaught' % (name, desc), flush=True)
            else:
                print('ok   %-40s caught by %s [%.0f s]' % (name, desc, dt), flush=True)
            rows.append((name, hit[0]))
        else:
            if expect.startswith('uncaught'):
                print('xfail %-39s NOT caught (listed: %s) [%.0f s]' % (name, expect[9:].strip()[:120],
                                                                       dt), flush=True)
                rows.append((name, 'uncaught (listed)'))
            else:
                bad.append('%s: NOT caught on the CI seeds (1..%d x400 and every regression '
                           'seed and scenario): a hole in the judge' % (name, args.seeds))
                print('FAIL %-40s NOT caught [%.0f s]' % (name, dt), flush=True)
                rows.append((name, 'NOT caught'))
        for g in guards_ok:
            print('     %-40s guards %s' % ('', g), flush=True)
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    else:
        print('sim-mutations: mutants kept in %s' % work)
    print('sim-mutations: %d mutations, %d caught, %d failures; %.0f s' %
          (len(patches), sum(1 for r in rows if not r[1].startswith(('uncaught', 'NOT'))),
           len(bad), time.time() - t0))
    for b in bad:
        print('sim-mutations: FAIL ' + b)
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
