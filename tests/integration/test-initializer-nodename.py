#!/usr/bin/env python3
"""Node mode waits for the Node under the name the kubelet registers: the node config's nodeName
when set (the agent writes it into the kubelet drop-in), else --node-name in lower case (the
kubelet lowers its host name; the unit passes the metadata host name). Metadata without a host
name makes the unit pass an empty --node-name=: the node config's nodeName is used then, and
without one the initializer says so and exits."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from cntap import Tap, build  # noqa: E402
from fakecloud import FakeCloud  # noqa: E402
from fakekubeclient import kube_server  # noqa: E402

TAINT = "node.cloudprovider.kubernetes.io/uninitialized"


def tainted_node(name):
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
            "spec": {"taints": [{"key": TAINT, "value": "true", "effect": "NoSchedule"}]}}


def initialized(k, name, timeout=30):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        st, n = k.api("GET", "/api/v1/nodes/" + name)
        if st == 200 and not any(t.get("key") == TAINT for t in n.get("spec", {}).get("taints") or []):
            return n
        time.sleep(0.1)
    return None


def case(t, k, c, tmp, label, flag_name, config_name, expect):
    root = os.path.join(tmp, label)
    os.makedirs(os.path.join(root, "etc", "cloudnode"))
    cfg = {"platform": "aws", "metadata": {"endpoint": c.url}}
    if config_name:
        cfg["nodeName"] = config_name
    path = os.path.join(root, "etc", "cloudnode", "cloudnode.yaml")
    with open(path, "w") as f:
        json.dump(cfg, f)
    k.api("POST", "/api/v1/nodes", tainted_node(expect))
    log = open(os.path.join(tmp, label + ".log"), "a+")  # appended to: log.seek(0) moves the writer too
    p = subprocess.Popen([build("initializer", "cloudnode-initializer"), "--kubeconfig", k.kubeconfig,
                          "--node-name", flag_name, "--config", path, "--port", "0"], stdout=log, stderr=subprocess.STDOUT)
    try:
        n = initialized(k, expect)
        log.seek(0)
        t.ok(n is not None and n["spec"].get("providerID", "").startswith("aws:///"),
             "%s: Node %s initialized" % (label, expect), log.read()[-2000:])
    finally:
        p.terminate()
        p.wait(10)


def no_name(t, k, tmp):
    root = os.path.join(tmp, "no-name")
    os.makedirs(os.path.join(root, "etc", "cloudnode"))
    path = os.path.join(root, "etc", "cloudnode", "cloudnode.yaml")
    with open(path, "w") as f:
        json.dump({"platform": "aws"}, f)
    p = subprocess.run([build("initializer", "cloudnode-initializer"), "--kubeconfig", k.kubeconfig, "--node-name=",
                        "--config", path, "--port", "0"], capture_output=True, text=True, timeout=30)
    t.ok(p.returncode != 0 and "nodeName" in p.stderr,
         "empty --node-name without nodeName: refused, naming nodeName", p.stderr[-1000:])


def main():
    t = Tap()
    tmp = tempfile.mkdtemp(prefix="cn-init-nodename-")
    try:
        with kube_server(os.path.join(tmp, "kube")) as k, FakeCloud(os.path.join(tmp, "cloud"), platform="aws") as c:
            case(t, k, c, tmp, "upper-case host name", "Worker-Upper", None, "worker-upper")
            case(t, k, c, tmp, "nodeName in the node config", "ip-10-0-0-13", "custom-node", "custom-node")
            case(t, k, c, tmp, "empty --node-name (no metadata host name) with nodeName", "", "named-by-config",
                 "named-by-config")
            no_name(t, k, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
