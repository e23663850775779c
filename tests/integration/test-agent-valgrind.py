#!/usr/bin/env python3
"""cloudnode-agent under valgrind on the paths that allocate and drop HTTP requests: retries after
a 500, an IMDSv2 token refused, a slow key ending at the deadline, connection refused. Each run
must end with no leaked block and no memory error. (A retry used to leak the previous attempt's
request.)"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from cntap import Tap, build  # noqa: E402
from fakecloud import FakeCloud  # noqa: E402

AGENT = build("agent", "cloudnode-agent")


def run_agent(t, tmp, name, endpoint, faults=None, cloud=None, extra=None):
    root = os.path.join(tmp, name)
    os.makedirs(os.path.join(root, "etc", "cloudnode"))
    cfg = {"platform": "aws", "metadata": {"endpoint": endpoint, "retries": 2, "timeout": "1s", "deadline": "3s"}}
    cfg["metadata"].update(extra or {})
    with open(os.path.join(root, "etc", "cloudnode", "cloudnode.yaml"), "w") as f:
        json.dump(cfg, f)
    if cloud:
        cloud.clear_faults()
        for rule in faults or []:
            cloud.fail(rule)
    r = subprocess.run(["valgrind", "--quiet", "--leak-check=full", "--errors-for-leak-kinds=definite,indirect",
                        "--show-leak-kinds=definite,indirect", "--error-exitcode=99", AGENT, "--root", root, "--once"],
                       capture_output=True, text=True, timeout=120)
    t.ok(r.returncode != 99, "%s: no leak or memory error (agent exit %d)" % (name, r.returncode), r.stderr[-3000:])
    return r


def main():
    t = Tap()
    if not shutil.which("valgrind"):
        t.skip_all("valgrind not installed")
    if os.environ.get("CN_SANITIZERS"):
        # AddressSanitizer's shadow memory and valgrind's cannot share a process: the agent of
        # this build aborts under valgrind before it runs (the plain build is checked).
        t.skip_all("an AddressSanitizer build does not run under valgrind")
    tmp = tempfile.mkdtemp(prefix="cn-agent-vg-")
    try:
        with FakeCloud(os.path.join(tmp, "cloud"), platform="aws") as c:
            r = run_agent(t, tmp, "retried 500", c.url, [{"path": "instance-id", "status": 500, "count": 2}], c)
            t.eq(r.returncode, 0, "retried 500: the run succeeds")
            r = run_agent(t, tmp, "token refused", c.url, [{"method": "PUT", "path": "api/token", "status": 403}], c)
            t.eq(r.returncode, 0, "token refused: IMDSv1 fallback succeeds")
            r = run_agent(t, tmp, "deadline", c.url, [{"path": "instance-type", "latency": 10}], c)
            t.ok(r.returncode != 0, "deadline: the run fails")
        run_agent(t, tmp, "connection refused", "http://127.0.0.1:9")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
