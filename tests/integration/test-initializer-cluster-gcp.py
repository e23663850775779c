#!/usr/bin/env python3
"""cloudnode-initializer in cluster mode with --cloud-provider=gcp against tests/fake-kube-apiserver
(RBAC of the shipped manifests) and the Compute Engine API of tests/fake-cloud, with the token of
the metadata server's default service account, as the bootstrap static pod gets it: Nodes by
providerID and by name initialized with two writes each (dual-stack addresses, machine type,
region and zone), a malformed answer ending as a Warning Event with nothing written, throttling
storms riding out, and the lifecycle controller (a deleted instance's Node deleted, a TERMINATED
one tainted as shut down); and the bootstrap static pod cloudnode-agent renders on a gcp
control-plane VM, run as its arguments say."""
import os
import subprocess
import sys
import tempfile

import yaml

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from cntap import Tap  # noqa: E402
from cninit import (BINARY, BUILD, CLUSTER_SA, RBAC, SHUTDOWN_TAINT, Initializer, addresses, events, get_node,  # noqa: E402
                    initialized, make_node, set_status, tainted, wait_for, writes)
from fakecloud import FakeCloud  # noqa: E402
from fakekubeclient import kube_server  # noqa: E402

PROJECT = "cloudnode-test"


def gcp_conf(d, c, vm):
    path = os.path.join(d, "gcp.conf")
    with open(path, "w") as f:
        f.write("[Global]\nproject-id = %s\nlocal-zone = %s\napi-endpoint = %s/compute/v1\nmetadata-endpoint = %s\n"
                % (PROJECT, vm["zone"], c.url, c.metadata_url(vm["id"])))
    return path


def pid(inst):
    return "gce://%s/%s/%s" % (PROJECT, inst["zone"], inst["name"])


def test_initialize(t, k, c, d):
    cp = c.add_instance({"platform": "gcp", "name": "cp0"})  # the control-plane VM the pod runs on
    g = [c.add_instance({"platform": "gcp", "name": "g%d" % i, "zone": "us-central1-%s" % "abc"[i % 3]})
         for i in range(1, 4)]
    make_node(k, "g1", provider_id=pid(g[0]))
    make_node(k, "g2.c.%s.internal" % PROJECT)
    make_node(k, "g3")
    bad = c.add_instance({"platform": "gcp", "name": "bad"})
    make_node(k, "bad", provider_id=pid(bad))
    c.fail({"platform": "gcp", "service": "compute", "path": "bad", "status": 200,
            "body": {"id": "7", "name": "bad/../x", "zone": "zones/us-central1-a"}})
    c.throttle("gcp", count=3, service="compute", path="g3")
    args = ["--kubeconfig=" + k.kubeconfig_for(CLUSTER_SA), "--cloud-provider=gcp",
            "--cloud-config=" + gcp_conf(d, c, cp), "--leader-elect=false", "--controllers=cloud-node",
            "--bind-address=127.0.0.1", "-v", "4"]
    with Initializer(args, state_dir=d, name="gcp") as i:
        names = ["g1", "g2.c.%s.internal" % PROJECT, "g3"]
        t.ok(wait_for(lambda: all(initialized(k, n) for n in names), 60), "the three Nodes are initialized",
             i.log()[-3000:])
        for name, inst in zip(names, g):
            node = get_node(k, name)
            t.eq(node["spec"].get("providerID"), pid(inst), "%s: providerID gce://project/zone/name" % name)
            labels = node["metadata"]["labels"]
            t.eq((labels.get("node.kubernetes.io/instance-type"), labels.get("topology.kubernetes.io/region"),
                  labels.get("topology.kubernetes.io/zone")), (inst["type"], "us-central1", inst["zone"]),
                 "%s: machine type, region and zone labels" % name)
            t.eq(sorted(addresses(node)), sorted([("InternalIP", inst["private_ipv4"]), ("InternalIP", inst["ipv6"]),
                                                  ("ExternalIP", inst["public_ipv4"])]),
                 "%s: dual-stack addresses" % name)
            t.eq(writes(k, CLUSTER_SA, name), [("patch", "status", name, 200), ("patch", "", name, 200)],
                 "%s: exactly two writes" % name)
        ev = wait_for(lambda: events(k, "bad", "FailedToGetInstance"), 20)
        t.ok(ev and ev[0].get("type") == "Warning" and "unexpected instance object" in ev[0].get("message", ""),
             "a hostile answer: a Warning Event that says what was wrong", ev)
        t.ok(tainted(get_node(k, "bad")), "that Node stays tainted")
        t.eq(writes(k, CLUSTER_SA, "bad"), [], "nothing is written to it")
        log = [r for r in c.requests() if r.get("path", "").endswith("/service-accounts/default/token")]
        t.eq(len(log), 1, "one token from the metadata server serves every lookup")
    c.clear_faults()


def test_lifecycle(t, k, c, d):
    cp = c.add_instance({"platform": "gcp", "name": "cp1"})
    a = c.add_instance({"platform": "gcp", "name": "lc-gone"})
    b = c.add_instance({"platform": "gcp", "name": "lc-stop"})
    make_node(k, "lc-gone", tainted=False, provider_id=pid(a), ready=False)
    make_node(k, "lc-stop", tainted=False, provider_id=pid(b), ready=False)
    c.remove_instance(a["id"])
    c.stop(b["id"])
    args = ["--kubeconfig=" + k.kubeconfig_for(CLUSTER_SA), "--cloud-provider=gcp",
            "--cloud-config=" + gcp_conf(d, c, cp), "--leader-elect=false", "--controllers=*,-cloud-node",
            "--bind-address=127.0.0.1", "--node-monitor-period=1s", "--node-startup-grace-period=0s", "-v", "4"]
    with Initializer(args, state_dir=d, name="gcp-lifecycle") as i:
        t.ok(wait_for(lambda: get_node(k, "lc-gone") is None, 30), "the Node of a deleted instance is deleted",
             i.log()[-2000:])
        t.ok(wait_for(lambda: tainted(get_node(k, "lc-stop"), SHUTDOWN_TAINT), 30),
             "a TERMINATED instance: shutdown taint")
        c.start(b["id"])
        set_status(k, "lc-stop", {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]})
        t.ok(wait_for(lambda: not tainted(get_node(k, "lc-stop"), SHUTDOWN_TAINT), 30),
             "running and Ready again: the taint is removed")
        t.ok(get_node(k, "lc-stop") is not None, "a stopped instance's Node is not deleted")


def test_static_pod(t, k, c, d):
    """The agent's bootstrap static pod on a gcp control-plane VM: its initializer, started with
    the pod's arguments (paths under the test's root) and the rendered cloud.conf, initializes a
    Node with the token of the VM's own service account."""
    vm = c.add_instance({"platform": "gcp", "name": "cp-pod"})
    w = c.add_instance({"platform": "gcp", "name": "pod-w1", "zone": "us-central1-c"})
    root = tempfile.mkdtemp(prefix="root", dir=d)
    os.makedirs(os.path.join(root, "etc", "cloudnode"))
    md = c.metadata_url(vm["id"])
    with open(os.path.join(root, "etc", "cloudnode", "cloudnode.yaml"), "w") as f:
        yaml.safe_dump({"role": "control-plane", "metadata": {"endpoint": md, "retries": 0},
                        "cloudConfig": {"Global": {"api-endpoint": c.url + "/compute/v1", "metadata-endpoint": md}}},
                       f)
    with open(os.path.join(root, "etc", "cloudnode", "images.json"), "w") as f:
        f.write('{"cloudControllerManager": "example.com/cloudnode-initializer:test"}')
    p = subprocess.run([os.path.join(BUILD, "agent", "cloudnode-agent"), "--root", root, "--platform", "gcp", "--once"],
                       capture_output=True, text=True, timeout=60, env=dict(os.environ, CLOUDNODE_LOG_TARGET="console"))
    t.eq(p.returncode, 0, "the agent runs on a gcp control-plane VM") or t.diag(p.stderr)
    pod_path = os.path.join(root, "etc", "kubernetes", "manifests", "cloudnode-cloud-node.yaml")
    t.ok(os.path.exists(pod_path), "it renders the bootstrap static pod")
    with open(pod_path) as f:
        args = yaml.safe_load(f)["spec"]["containers"][0]["args"]
    with open(os.path.join(root, "etc", "kubernetes", "bootstrap-configs", "cloud.conf")) as f:
        conf = f.read()
    t.ok("project-id = cloudnode-test" in conf and "local-zone = %s" % vm["zone"] in conf,
         "cloud.conf names the project and zone from the metadata", conf)
    make_node(k, "pod-w1")
    run = []
    for a in args:
        if a.startswith("--kubeconfig="):
            a = "--kubeconfig=" + k.kubeconfig_for(CLUSTER_SA)
        elif a.startswith("--cloud-config="):
            a = "--cloud-config=" + os.path.join(root, a.split("=", 1)[1].lstrip("/"))
        elif a.startswith("--port="):
            continue
        run.append(a)
    t.ok("--cloud-provider=gcp" in run, "the pod runs the gcp provider", args)
    with Initializer(run + ["--bind-address=127.0.0.1"], state_dir=d, name="static-pod") as i:
        node = wait_for(lambda: initialized(k, "pod-w1"), 30)
        t.ok(node, "the static pod's initializer initializes a Node", i.log()[-2000:])
        t.eq((node or {}).get("spec", {}).get("providerID"), pid(w), "with its gce:// providerID")


def main():
    t = Tap()
    if not os.access(BINARY, os.X_OK):
        t.bail_out("%s is not built" % BINARY)
    with tempfile.TemporaryDirectory() as d:
        with kube_server(os.path.join(d, "kube"), rbac=RBAC) as k, FakeCloud(os.path.join(d, "cloud")) as c:
            t.run(test_initialize, k, c, d)
            t.run(test_lifecycle, k, c, d)
            t.run(test_static_pod, k, c, d)
    sys.exit(t.done())


main()
