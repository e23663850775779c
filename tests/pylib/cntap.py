"""TAP output for the Python integration tests (run through automake's tap-driver.sh).

Usage:
    t = Tap()
    t.ok(cond, "name")            # one test line
    t.eq(got, want, "name")      # with a diagnostic on mismatch
    t.skip_all("why")            # plan 1..0 # SKIP, exit 0
    wait_for(fn, timeout=30)     # polls fn() until it returns something true
    sys.exit(t.done())
Paths of the tree come from CN_TOP_SRCDIR / CN_TOP_BUILDDIR (set by make check)."""
import os
import shutil
import subprocess
import sys
import time
import traceback

TOP_SRCDIR = os.environ.get("CN_TOP_SRCDIR") or os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TOP_BUILDDIR = os.environ.get("CN_TOP_BUILDDIR") or TOP_SRCDIR
FIXTURES = os.environ.get("CN_FIXTURES") or os.path.join(TOP_SRCDIR, "tests", "data", "fixtures")


def src(*p):
    return os.path.join(TOP_SRCDIR, *p)


def metric_value(text, series):
    """The value of one series (name with its labels, as exposed) in Prometheus text, or None."""
    for line in text.splitlines():
        if line.startswith(series + " "):
            return float(line.split()[1])
    return None


def wait_for(fn, timeout=30.0, step=0.05):
    """Polls fn() every step seconds until it returns something true, and returns that; after
    timeout seconds, fn()'s last (false) value."""
    end = time.monotonic() + timeout
    while True:
        v = fn()
        if v or time.monotonic() >= end:
            return v
        time.sleep(step)


def root_is_mount():
    """Whether "/" is a mount point of this process's mount namespace. It is not in a chroot (as a
    fresh build root is): there "/" cannot be made private, so nothing can be mounted privately."""
    with open("/proc/self/mountinfo") as f:
        return any(line.split()[4] == "/" for line in f)


def sibling_test(name):
    """Another test program of tests/integration loaded as a module, to share its setup and helpers
    rather than copy them (its main() is not run)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location(name.replace("-", "_").replace(".py", ""),
                                                  os.path.join(TOP_SRCDIR, "tests", "integration", name))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def build(*p):
    return os.path.join(TOP_BUILDDIR, *p)


class Tap:
    def __init__(self):
        self.n = 0
        self.failed = 0

    def diag(self, msg):
        for line in str(msg).splitlines() or [""]:
            print("# " + line)
        sys.stdout.flush()

    def ok(self, cond, name, diag=None):
        self.n += 1
        print("%sok %d - %s" % ("" if cond else "not ", self.n, name))
        if not cond:
            self.failed += 1
            if diag is not None:
                self.diag(diag)
        sys.stdout.flush()
        return bool(cond)

    def eq(self, got, want, name):
        return self.ok(got == want, name, "got:  %r\nwant: %r" % (got, want))

    def skip(self, name, why):
        self.n += 1
        print("ok %d - %s # SKIP %s" % (self.n, name, why))
        sys.stdout.flush()

    def bail_out(self, why):
        """Something of this tree the test needs is missing (a program not built, a project file):
        that is an error of the tree, never a skip. The TAP driver reports it as ERROR."""
        print("Bail out! %s" % why)
        sys.stdout.flush()
        sys.exit(1)

    def promtool_check_metrics(self, text):
        """One test: Prometheus's own linter accepts the exposition text (skipped without it)."""
        promtool = shutil.which("promtool")
        if not promtool:
            return self.skip("promtool check metrics", "promtool not installed")
        p = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True)
        return self.ok(p.returncode == 0, "promtool check metrics passes", p.stdout + p.stderr)

    def skip_all(self, why):
        print("1..0 # SKIP %s" % why)
        sys.stdout.flush()
        sys.exit(0)

    def run(self, fn, *args):
        """Run a test function; an exception is a failed test, not a crashed suite."""
        try:
            fn(self, *args)
        except Exception:
            self.ok(False, "%s raised" % fn.__name__, traceback.format_exc())

    def done(self):
        print("1..%d" % self.n)
        sys.stdout.flush()
        return 1 if self.failed else 0
