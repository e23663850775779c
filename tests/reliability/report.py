#!/usr/bin/env python3
"""Reruns the reliability suite and prints its figures as a Markdown section (docs/reliability.md).

    tests/reliability/report.py [--long] [--fuzz-runs N] [--output FILE]

Fuzz targets run through tests/fuzz/run-fuzz.sh when they are built (`make fuzz-build`); each
tests/integration/test-reliability-*.py appends its figures to a JSON-lines file given in
CN_RELIABILITY_STATS. --long uses the documented longer forms (every crash point, a longer
soak). Figures are only what the runs printed; a test that failed is reported as failed."""
import argparse
import datetime
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.environ.get("CN_TOP_SRCDIR") or os.path.abspath(os.path.join(HERE, "..", ".."))
BUILD = os.environ.get("CN_TOP_BUILDDIR") or SRC
LONG_ENV = {"CN_RELIABILITY_CRASH_TRIALS": "0", "CN_RELIABILITY_SOAK_SECONDS": "300",
            "CN_RELIABILITY_WATCH_RESTARTS": "3000", "CN_RELIABILITY_MACHINES": "40"}


def run_fuzz(runs):
    script = os.path.join(SRC, "tests", "fuzz", "run-fuzz.sh")
    bins = [b for b in glob.glob(os.path.join(BUILD, "tests", "fuzz", "fuzz-*"))
            if os.access(b, os.X_OK) and not b.endswith((".c", ".o", ".log", ".trs"))]
    if not bins:
        return None
    env = dict(os.environ, CN_TOP_SRCDIR=SRC, CN_TOP_BUILDDIR=BUILD)
    p = subprocess.run(["sh", script, "--runs", str(runs)], capture_output=True, text=True, env=env)
    rows = []
    for line in p.stdout.splitlines():
        m = re.match(r"(not )?ok \d+ - fuzz ([^:\s]+)(?:: (\d+|\?) inputs)?", line)
        if m:
            rows.append((m.group(2), m.group(3) or "-", "crash" if m.group(1) else "ok"))
    return rows


def run_tests(long):
    stats = os.path.join(tempfile.mkdtemp(prefix="cn-report-"), "stats.jsonl")
    env = dict(os.environ, CN_TOP_SRCDIR=SRC, CN_TOP_BUILDDIR=BUILD, CN_RELIABILITY_STATS=stats,
               PYTHONDONTWRITEBYTECODE="1")
    if long:
        env.update(LONG_ENV)
    results = []
    for test in sorted(glob.glob(os.path.join(SRC, "tests", "integration", "test-reliability-*.py"))):
        p = subprocess.run([sys.executable, test], capture_output=True, text=True, env=env)
        lines = p.stdout.splitlines()
        passed = sum(1 for l in lines if l.startswith("ok "))
        failed = sum(1 for l in lines if l.startswith("not ok "))
        results.append((os.path.basename(test), passed, failed, p.returncode))
    figures = []
    if os.path.exists(stats):
        with open(stats) as f:
            figures = [json.loads(l) for l in f if l.strip()]
    return results, figures


def markdown(fuzz, results, figures, long, runs):
    out = ["## Reliability", "",
           "Produced by `tests/reliability/report.py%s` on %s UTC." %
           (" --long" if long else "", datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M")), ""]
    settings = {k: v for k, v in sorted(os.environ.items()) if k.startswith("CN_RELIABILITY_") and k != "CN_RELIABILITY_STATS"}
    if long:
        settings.update(LONG_ENV)
    if settings:
        out += ["Settings: %s." % ", ".join("`%s=%s`" % kv for kv in sorted(settings.items())), ""]
    if fuzz is None:
        out += ["Fuzzing: targets not built (`make fuzz-build`), not run.", ""]
    else:
        total = sum(int(n) for _, n, _ in fuzz if n.isdigit())
        out += ["### Fuzzing (libFuzzer, ASan+UBSan, %d runs per target requested)" % runs, "",
                "| target | inputs executed | result |", "|---|---|---|"]
        out += ["| %s | %s | %s |" % r for r in fuzz]
        out += ["", "Total inputs executed: %d." % total, ""]
    out += ["### Tests", "", "| test | passed | failed | exit |", "|---|---|---|---|"]
    out += ["| %s | %d | %d | %d |" % r for r in results]
    out += [""]
    for f in figures:
        if f["test"] == "crash":
            out.append("- Crash consistency: %d SIGKILL trials of cloudnode-agent (%d killed mid-run) out of %d "
                       "kill points (openat, write, fchmod, fsync, renameat, unlinkat calls of one run); files found partial or not converging: %d; temporary files "
                       "left behind: %d (seed %d)." % (f["trials"], f["killed"], f["points"], f["failures"],
                                                      f["leftover_temps"], f["seed"]))
        elif f["test"] == "hostile":
            out.append("- Hostile metadata: %d cases (field x value), %d refused with previous files kept, %d "
                       "accepted and read back safely." % (f["cases"], f["refused"], f["accepted"]))
        elif f["test"] == "secrets":
            out.append("- Secrets: %d secrets searched in %d logs, events, metrics and written files (%d bytes); "
                       "occurrences found: %d." % (f["secrets"], f["sources"], f["bytes"], f["found"]))
        elif f["test"] == "soak":
            out.append("- Fault soak (cloudnode-initializer, cluster mode, Hetzner): %s s of random faults, %d faults "
                       "injected, %d Nodes each initialized exactly once; RSS %d kB after warm-up, %d kB at the end; "
                       "%d watch restarts with RSS %d -> %d kB and fds %d -> %d (seed %d)." %
                       (f.get("seconds"), f["faults"], f.get("nodes", 0), f.get("rss_warm_kb", 0),
                        f.get("rss_end_kb", 0), f.get("watch_restarts", 0), *(f.get("rss_watch_kb") or [0, 0]),
                        *(f.get("fds_watch") or [0, 0]), f["seed"]))
        elif f["test"] == "machines":
            out.append("- Machine soak (cloudnode-controller, Hetzner): %d machines, %d faults injected, %d of %d "
                       "converged under faults, no duplicate or orphaned server asserted; RSS %d -> %d kB, fds "
                       "%d -> %d (seed %d)." % (f.get("machines", 0), f["faults"], f.get("converged", 0),
                                                f.get("machines", 2) - 2, *(f.get("rss_kb") or [0, 0]),
                                                *(f.get("fds") or [0, 0]), f["seed"]))
        else:
            out.append("- %s: %s" % (f["test"], ", ".join("%s %s" % kv for kv in sorted(f.items()) if kv[0] != "test")))
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--long", action="store_true", help="longer forms of every test")
    ap.add_argument("--fuzz-runs", type=int, default=20000)
    ap.add_argument("--output", help="write the section here instead of stdout")
    a = ap.parse_args()
    fuzz = run_fuzz(a.fuzz_runs)
    results, figures = run_tests(a.long)
    text = markdown(fuzz, results, figures, a.long, a.fuzz_runs)
    if a.output:
        # The security section below the figures is written by hand: keep it.
        kept = ""
        if os.path.exists(a.output):
            with open(a.output) as f:
                old = f.read()
            at = old.find("\n## Security")
            kept = old[at:] if at >= 0 else ""
        with open(a.output, "w") as f:
            f.write(text + kept)
    else:
        sys.stdout.write(text)
    return 1 if any(r[2] or r[3] for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
