"""A cloud's own command-line client run by a test against the fakes: each call is one test
point (exit status 0), its output kept for the diagnostics; `json()` asks the client for JSON
and parses it."""
import json
import os
import subprocess
import time


def wait_for(cond, timeout=30):
    """Poll cond until true; False when it never became true within timeout seconds."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


class Cli:
    def __init__(self, t, argv, env, json_args, timeout=120):
        self.t = t
        self.argv = list(argv)
        self.env = env
        self.json_args = list(json_args)
        self.timeout = timeout

    def run(self, *args):
        p = subprocess.run(self.argv + list(args), env=self.env, capture_output=True, text=True,
                           timeout=self.timeout)
        return p.returncode, p.stdout + p.stderr

    def ok(self, name, *args):
        rc, out = self.run(*args)
        self.t.ok(rc == 0, name, "%s %s: exit %d\n%s" % (os.path.basename(self.argv[0]), " ".join(args), rc, out))
        return out

    def json(self, name, *args):
        """The parsed JSON output; an empty list for the `null` some clients print for one."""
        rc, out = self.run(*(list(args) + self.json_args))
        try:
            doc = (json.loads(out) if out.strip() != "null" else []) if rc == 0 else None
        except ValueError:
            doc = None
        self.t.ok(doc is not None, name, "%s %s: exit %d\n%s" % (os.path.basename(self.argv[0]), " ".join(args), rc, out))
        return doc
