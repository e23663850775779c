#!/usr/bin/env python3
"""Crash consistency of cloudnode-agent: the agent is killed with SIGKILL at chosen points of its
file-writing syscalls (strace's syscall-count signal injection) while it replaces a complete set of
outputs (version A) with a new one (version B, after the instance's metadata changed). After every
kill each file under the root must be exactly its A or its B content (never partial, empty or
missing), leftover temporary files must be no more readable than the file they were to replace,
and the next run must converge on B.

Bounded for `make check`: CN_RELIABILITY_CRASH_TRIALS (default 30) kill points: every point of
the write phase, the rest drawn at random among the openat calls, seed CN_RELIABILITY_SEED
(printed). Longer: CN_RELIABILITY_CRASH_TRIALS=0 kills at every counted
syscall invocation once; any larger number draws that many points (with repetition beyond the
count). CN_RELIABILITY_STATS=FILE appends the figures as one JSON line (tests/reliability/report.py)."""
import json
import os
import random
import shutil
import stat
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reliability"))
from relutil import record  # noqa: E402
from cntap import Tap, build  # noqa: E402
from fakecloud import FakeCloud  # noqa: E402

import yaml  # noqa: E402

AGENT = build("agent", "cloudnode-agent")
# Every syscall on the path from "decide to write" to "new name visible": a kill may land before,
# inside or after each of them.
SYSCALLS = ("openat", "write", "fchmod", "fsync", "renameat", "unlinkat")


def make_root(tmp, endpoint):
    root = tempfile.mkdtemp(prefix="root", dir=tmp)
    os.makedirs(os.path.join(root, "etc", "cloudnode"))
    with open(os.path.join(root, "etc", "cloudnode", "cloudnode.yaml"), "w") as f:
        yaml.safe_dump({"role": "control-plane", "metadata": {"endpoint": endpoint, "retries": 0}}, f)
    with open(os.path.join(root, "etc", "cloudnode", "images.json"), "w") as f:
        json.dump({"cloudControllerManager": "example.com/ccm:test"}, f)
    return root


def agent_argv(root):
    return [AGENT, "--root", root, "--platform", "aws", "--once"]


def agent_env():
    e = dict(os.environ, CLOUDNODE_LOG_TARGET="console")
    e.pop("NOTIFY_SOCKET", None)
    # In the sanitizer build: LeakSanitizer cannot work in a process traced by strace (it aborts);
    # ASan and UBSan keep checking everything else.
    e["ASAN_OPTIONS"] = ":".join(filter(None, [e.get("ASAN_OPTIONS", ""), "detect_leaks=0"]))
    return e


def run_agent(root):
    return subprocess.run(agent_argv(root), capture_output=True, text=True, env=agent_env(), timeout=60)


def snapshot(root):
    """path -> bytes for every regular file; temporary names (".#...") separately with their mode."""
    files, temps = {}, {}
    for d, _, names in os.walk(root):
        for n in names:
            p = os.path.join(d, n)
            rel = os.path.relpath(p, root)
            if n.startswith(".#"):
                temps[rel] = stat.S_IMODE(os.lstat(p).st_mode)
                continue
            with open(p, "rb") as f:
                files[rel] = f.read()
    return files, temps


def count_syscalls(root, tmp):
    """How often the agent makes each syscall of SYSCALLS in an A -> B run."""
    out = os.path.join(tmp, "strace-count")
    subprocess.run(["strace", "-f", "-qq", "-o", out, "-e", "trace=" + ",".join(SYSCALLS)] + agent_argv(root),
                   capture_output=True, env=agent_env(), timeout=60, check=True)
    counts = dict.fromkeys(SYSCALLS, 0)
    with open(out) as f:
        for line in f:
            # "PID name(args..." or "name(args..." ; resumed lines ("<... name resumed>") are not new calls.
            head = line.split("(", 1)[0].split()
            if head and head[-1] in counts:
                counts[head[-1]] += 1
    return counts


def main():
    t = Tap()
    if not shutil.which("strace"):
        t.skip_all("strace not installed (needed for syscall-count kill injection)")
    trials = int(os.environ.get("CN_RELIABILITY_CRASH_TRIALS", "30"))
    seed = int(os.environ.get("CN_RELIABILITY_SEED", str(int(time.time()))))
    t.diag("seed %d (CN_RELIABILITY_SEED to repeat)" % seed)
    rng = random.Random(seed)
    tmp = tempfile.mkdtemp(prefix="cn-crash-")
    stats = {"test": "crash", "trials": 0, "killed": 0, "seed": seed}
    try:
        with FakeCloud(os.path.join(tmp, "fc"), platform="aws") as c:
            inst = c.instance
            base = make_root(tmp, c.url)
            p = run_agent(base)
            t.eq(p.returncode, 0, "version A written") or t.diag(p.stderr)
            a_files, _ = snapshot(base)
            # New metadata: every output (env, drop-in, cloud.conf, static pod) depends on one of these.
            c.update_instance(inst["id"], {"type": "c7.crash", "zone": inst["region"] + "z",
                                            "private_ipv4": "10.0.77.7", "hostname": "crash-b.internal"})
            b_root = tempfile.mkdtemp(prefix="b", dir=tmp)
            shutil.rmtree(b_root)
            shutil.copytree(base, b_root, symlinks=True)
            p = run_agent(b_root)
            t.eq(p.returncode, 0, "version B written") or t.diag(p.stderr)
            b_files, _ = snapshot(b_root)
            final_modes = {k: stat.S_IMODE(os.stat(os.path.join(b_root, k)).st_mode) for k in b_files}
            changed = sorted(k for k in b_files if a_files.get(k) != b_files[k])
            t.ok(len(changed) >= 3, "new metadata changes several outputs", changed)

            probe = tempfile.mkdtemp(prefix="probe", dir=tmp)
            shutil.rmtree(probe)
            shutil.copytree(base, probe, symlinks=True)
            counts = count_syscalls(probe, tmp)
            t.diag("syscalls in an A -> B run: %s" % counts)
            t.ok(counts["renameat"] >= len(changed), "one rename per changed file observed", counts)
            points = [(sc, n) for sc in SYSCALLS for n in range(1, counts[sc] + 1)]
            # The write phase (write, fchmod, fsync, renameat, unlinkat) is where partial files could
            # appear, so every one of its points is always in the plan; openat points (mostly reads of
            # configuration) fill the rest at random.
            core = [pt for pt in points if pt[0] != "openat"]
            rest = [pt for pt in points if pt[0] == "openat"]
            if trials == 0:
                plan = points
            elif trials <= len(points):
                plan = core[:trials] + rng.sample(rest, max(0, min(len(rest), trials - len(core))))
            else:
                plan = points + [rng.choice(points) for _ in range(trials - len(points))]

            bad, not_converged, open_temps, leftovers, stale_after = [], [], [], 0, []
            for sc, n in plan:
                root = os.path.join(tmp, "trial")
                shutil.rmtree(root, ignore_errors=True)
                shutil.copytree(base, root, symlinks=True)
                # strace counts invocations per syscall; the signal is raised on entry to the Nth.
                q = subprocess.run(["strace", "-f", "-qq", "-o", "/dev/null", "-e", "trace=" + sc,
                                    "-e", "inject=%s:signal=SIGKILL:when=%d" % (sc, n)] + agent_argv(root),
                                   capture_output=True, text=True, env=agent_env(), timeout=60)
                stats["trials"] += 1
                if q.returncode in (-9, 137):
                    stats["killed"] += 1
                files, temps = snapshot(root)
                for rel in set(a_files) | set(b_files) | set(files):
                    got = files.get(rel)
                    if got is None and rel not in a_files:
                        continue
                    if got not in (a_files.get(rel), b_files.get(rel)):
                        bad.append((sc, n, rel, None if got is None else got[:80]))
                leftovers += len(temps)
                # A temporary file gets its final mode just before the rename: it may be left with
                # that mode, never with more than the file it was to replace.
                for k, m in temps.items():
                    final = os.path.join(os.path.dirname(k), os.path.basename(k)[2:].rsplit(".", 1)[0])
                    fm = final_modes.get(final, 0o600)
                    if m & ~fm:
                        open_temps.append((sc, n, k, oct(m), oct(fm)))
                r = run_agent(root)
                files2, temps2 = snapshot(root)
                if r.returncode != 0 or any(files2.get(k) != v for k, v in b_files.items()):
                    not_converged.append((sc, n, r.returncode, r.stderr[-300:]))
                stale_after.extend((sc, n, k) for k in temps2)
            t.ok(stats["killed"] >= len(plan) * 9 // 10, "%d of %d trials killed the agent mid-run" %
                 (stats["killed"], len(plan)), stats)
            t.ok(not bad, "every file is its previous or its new complete version after each kill", bad[:5])
            t.ok(not open_temps, "temporary files left by a kill are no more readable than their target",
                 open_temps[:5])
            t.ok(not not_converged, "the next run converges on the new version after each kill", not_converged[:3])
            t.ok(not stale_after, "the next run removes the temporary files a kill left behind (%d left by kills)"
                 % leftovers, stale_after[:5])
            stats.update(points=len(points), leftover_temps=leftovers, failures=len(bad) + len(not_converged))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    record(stats)
    sys.exit(t.done())


if __name__ == "__main__":
    main()
