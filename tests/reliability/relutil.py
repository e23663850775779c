"""Helpers shared by the reliability tests (tests/integration/test-reliability-*.py)."""
import json
import os


def record(stats):
    """Figures for tests/reliability/report.py: one JSON line appended to the file named by
    CN_RELIABILITY_STATS (nothing when unset)."""
    path = os.environ.get("CN_RELIABILITY_STATS")
    if path:
        with open(path, "a") as f:
            f.write(json.dumps(stats) + "\n")


def machines_helpers():
    """Env, Controller and wait_for of the Cluster API machine tests (tests/pylib/capimachines.py),
    reused rather than copied."""
    import capimachines
    return capimachines


def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        return next((int(line.split()[1]) for line in f if line.startswith("VmRSS:")), 0)


def fd_count(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def fd_kinds(pid):
    """Open fds of a process split into sockets and everything else."""
    kinds = {"socket": 0, "other": 0}
    for f in os.listdir("/proc/%d/fd" % pid):
        try:
            target = os.readlink("/proc/%d/fd/%s" % (pid, f))
        except OSError:
            continue
        kinds["socket" if target.startswith("socket:") else "other"] += 1
    return kinds


def rss_check(t, cond, name, diag=None):
    """An RSS bound: meaningless under ASan, whose quarantine keeps freed memory (make check-sanitizers
    exports CN_SANITIZERS); there it is a skip that says so."""
    if os.environ.get("CN_SANITIZERS"):
        t.skip(name, "ASan keeps freed memory in quarantine: RSS is bounded in the normal build")
    else:
        t.ok(cond, name, diag)
