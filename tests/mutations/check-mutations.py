#!/usr/bin/env python3
"""Plants known bugs in a scratch copy of the tree and checks that the suite catches each one.

Every tests/mutations/NAME.patch is one bug: a header with `Bug:` (what it breaks) and `Tests:`
(the tests that must catch it), then a unified diff (patch -p1). The tree (the built source tree,
without .git) is copied once to a scratch directory; the listed tests are run there unmutated
first (they must pass, or nothing can be judged), then for each patch: apply, build, run its
tests, revert. A bug is caught when every one of its tests fails (a non-zero exit or a `not ok`
line; a skip is not a catch). Prints a table and exits non-zero if any bug was missed, a patch
did not apply or build, or a baseline test failed.

    tests/mutations/check-mutations.py --top DIR [--keep] [NAME...]

`make check-mutations` runs it; it is not part of `make check`. The tests run directly (not
through `make check`, which would also rebuild the shared container images from mutated
programs), with CN_TOP_SRCDIR/CN_TOP_BUILDDIR pointing at the scratch copy."""
import argparse
import glob
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TEST_TIMEOUT = 900


def parse(path):
    bug, tests, field = "", [], None
    with open(path) as f:
        for line in f:
            if line.startswith(("--- ", "diff ")):
                break
            if line.startswith("Bug:"):
                bug, field = line[4:].strip(), "bug"
            elif line.startswith("Tests:"):
                tests, field = line[6:].split(), "tests"
            elif not line.strip():
                field = None
            elif field == "bug":
                bug += " " + line.strip()
            elif field == "tests":
                tests += line.split()
    if not tests:
        raise SystemExit("%s: no Tests: line" % path)
    return {"name": os.path.basename(path)[:-len(".patch")], "path": path, "bug": bug, "tests": tests}


def make(scratch, targets, log):
    # The abs_* paths in the copied Makefiles still name the original tree: override them, so
    # that nothing a rule does reaches outside the scratch copy.
    over = ["%s=%s" % (v, scratch) for v in ("abs_top_srcdir", "abs_top_builddir", "abs_srcdir", "abs_builddir")]
    p = subprocess.run(["make", "-j2", "-C", scratch] + over + list(targets), stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT)
    log.write(p.stdout.decode(errors="replace"))
    return p.returncode == 0


def run_test(scratch, test, log, stop_at_failure=False):
    """True when the test passed, False when it failed, None when it skipped as a whole. With
    stop_at_failure, a failing test is interrupted at its first `not ok` (SIGINT to its process
    group, so its cleanup runs): the verdict is known, and a planted bug can make every later
    case wait for its timeout."""
    env = dict(os.environ, CN_TOP_SRCDIR=scratch, CN_TOP_BUILDDIR=scratch, PYTHONDONTWRITEBYTECODE="1",
               CN_FIXTURES=os.environ.get("CN_FIXTURES") or os.path.join(scratch, "tests", "data", "fixtures"))
    for k in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL"):
        env.pop(k, None)
    path = os.path.join(scratch, test)
    argv = [sys.executable, path] if test.endswith(".py") else [path]
    t0 = time.monotonic()
    p = subprocess.Popen(argv, cwd=scratch, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         start_new_session=True)
    lines, failed, interrupted = [], False, False
    for raw in p.stdout:
        line = raw.decode(errors="replace").rstrip("\n")
        lines.append(line)
        if line.startswith(("not ok", "Bail out!")):
            failed = True
            if stop_at_failure and not interrupted:
                interrupted = True
                try:
                    os.killpg(p.pid, signal.SIGINT)
                except ProcessLookupError:
                    pass
        if time.monotonic() - t0 > TEST_TIMEOUT and not interrupted:
            interrupted = True
            lines.append("(timed out after %d s)" % TEST_TIMEOUT)
            os.killpg(p.pid, signal.SIGINT)
    try:
        code = p.wait(60)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        code = p.wait()
    log.write("==== %s (exit %d, %.0f s%s)\n%s\n" % (test, code, time.monotonic() - t0,
                                                   ", stopped at the first failure" if interrupted else "",
                                                   "\n".join(lines)))
    log.flush()
    if failed or (code != 0 and not interrupted):
        return False if failed or code != 77 else None
    if code == 77 or any(l.startswith("1..0") for l in lines):
        return None
    return not interrupted


def targets_for(tests):
    """The programs to build: everything, plus the C test programs among the tests."""
    return ["all"] + [t for t in tests if not t.endswith(".py")]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--top", required=True, help="the built source tree")
    ap.add_argument("--keep", action="store_true", help="keep the scratch copy (its path is printed)")
    ap.add_argument("names", nargs="*", help="only these mutations (file names without .patch)")
    args = ap.parse_args()
    top = os.path.abspath(args.top)
    muts = [parse(p) for p in sorted(glob.glob(os.path.join(HERE, "*.patch")))]
    if args.names:
        muts = [m for m in muts if m["name"] in args.names]
        missing = set(args.names) - {m["name"] for m in muts}
        if missing:
            raise SystemExit("no such mutation: %s" % ", ".join(sorted(missing)))
    if not muts:
        raise SystemExit("no mutations in %s" % HERE)

    scratch = tempfile.mkdtemp(prefix="cloudnode-mutations-")
    logpath = os.path.join(scratch + ".log")
    print("scratch copy %s, log %s" % (scratch, logpath), flush=True)
    rows, bad = [], False
    try:
        with open(logpath, "w") as log:
            subprocess.run(["rsync", "-a", "--exclude=.git", "--exclude=build-sanitizers", top + "/", scratch + "/"],
                           check=True)
            all_tests = sorted({t for m in muts for t in m["tests"]})
            if not make(scratch, targets_for(all_tests), log):
                raise SystemExit("the unmutated scratch copy does not build (see %s)" % logpath)
            for test in all_tests:
                ok = run_test(scratch, test, log)
                print("baseline %-60s %s" % (test, {True: "pass", False: "FAIL", None: "SKIP"}[ok]), flush=True)
                if ok is not True:
                    bad = True
            if bad:
                raise SystemExit("a test fails or skips without any bug planted: nothing can be judged (see %s)"
                                 % logpath)
            for m in muts:
                log.write("######## mutation %s\n" % m["name"])
                with open(m["path"]) as f:
                    p = subprocess.run(["patch", "-p1", "-s", "-d", scratch], stdin=f, stdout=subprocess.PIPE,
                                       stderr=subprocess.STDOUT)
                if p.returncode != 0:
                    rows.append((m, "does not apply", []))
                    log.write(p.stdout.decode(errors="replace"))
                    continue
                try:
                    if not make(scratch, targets_for(m["tests"]), log):
                        rows.append((m, "does not build", []))
                        continue
                    results = [(test, run_test(scratch, test, log, stop_at_failure=True)) for test in m["tests"]]
                    caught = all(ok is False for _, ok in results)
                    rows.append((m, "caught" if caught else "MISSED", results))
                    print("%-42s %s" % (m["name"], rows[-1][1]), flush=True)
                finally:
                    with open(m["path"]) as f:
                        subprocess.run(["patch", "-p1", "-R", "-s", "-d", scratch], stdin=f, check=True)
    finally:
        if args.keep:
            print("kept %s" % scratch)
        else:
            shutil.rmtree(scratch, ignore_errors=True)

    print()
    print("| mutation | bug | tests (failed = caught) | result |")
    print("|---|---|---|---|")
    for m, result, results in rows:
        per = ", ".join("%s: %s" % (os.path.basename(t), {True: "passed", False: "failed", None: "skipped"}[ok])
                        for t, ok in results) or ", ".join(os.path.basename(t) for t in m["tests"])
        print("| %s | %s | %s | %s |" % (m["name"], m["bug"], per, result))
    missed = [m["name"] for m, result, _ in rows if result != "caught"]
    print()
    print("%d of %d planted bugs caught%s" % (len(rows) - len(missed), len(rows),
                                                "; not caught: " + ", ".join(missed) if missed else ""))
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
