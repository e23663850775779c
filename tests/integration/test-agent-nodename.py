#!/usr/bin/env python3
"""The node name the agent hands to the kubelet: an upper-case metadata host name is lowered as the
kubelet itself would; a host name that cannot be a Node name is refused (exit 4) and the files of
the previous good run stay as they were."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from cntap import Tap, build  # noqa: E402
from fakecloud import FakeCloud  # noqa: E402

DROPIN = os.path.join("etc", "systemd", "system", "kubelet.service.d", "20-cloudnode.conf")
ENV = os.path.join("run", "metadata", "cloudnode")


def read(root, rel):
    with open(os.path.join(root, rel)) as f:
        return f.read()


def main():
    t = Tap()
    tmp = tempfile.mkdtemp(prefix="cn-agent-nodename-")
    try:
        with FakeCloud(os.path.join(tmp, "cloud"), platform="hetzner") as c:
            iid = c.instance["id"]
            root = os.path.join(tmp, "root")
            os.makedirs(os.path.join(root, "etc", "cloudnode"))
            with open(os.path.join(root, "etc", "cloudnode", "cloudnode.yaml"), "w") as f:
                json.dump({"platform": "hetzner", "metadata": {"endpoint": c.url}}, f)

            def agent():
                return subprocess.run([build("agent", "cloudnode-agent"), "--root", root, "--once"],
                                      capture_output=True, text=True, timeout=60)

            c.update_instance(iid, {"name": "Worker-7", "hostname": "Worker-7"})
            r = agent()
            t.eq(r.returncode, 0, "an upper-case host name is accepted") or t.diag(r.stderr)
            t.ok('KUBELET_NODE_NAME=worker-7"' in read(root, DROPIN) or "KUBELET_NODE_NAME=worker-7\n" in read(root, DROPIN),
                 "and lowered for the kubelet, as the kubelet lowers it", read(root, DROPIN))
            before = {p: read(root, p) for p in (DROPIN, ENV)}
            for bad in ("-Bad_Label.Value-", "node one", "a..b"):
                c.update_instance(iid, {"name": bad, "hostname": bad})
                r = agent()
                t.eq(r.returncode, 4, "host name %r: refused with exit 4" % bad)
                t.ok("not a valid Kubernetes Node name" in r.stderr, "host name %r: one clear error" % bad, r.stderr)
                t.eq({p: read(root, p) for p in (DROPIN, ENV)}, before, "host name %r: previous files untouched" % bad)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
