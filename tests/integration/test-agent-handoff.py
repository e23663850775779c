#!/usr/bin/env python3
"""cloudnode-agent's bootstrap hand-off (daemon mode) against tests/fake-kube-apiserver: the static
pod stays while the in-cluster initializer Deployment has no available replica; when it has one,
the agent removes the static pod manifest, logs the hand-over and exits 0. The Deployment is
followed by list+watch, not by polling."""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from cntap import Tap, build, wait_for  # noqa: E402
from fakecloud import FakeCloud  # noqa: E402
from fakekubeclient import kube_server  # noqa: E402

AGENT = build("agent", "cloudnode-agent")
POD = "etc/kubernetes/manifests/cloudnode-cloud-node.yaml"
DEPLOY_PATH = "/apis/apps/v1/namespaces/%s/deployments"


def deployment(namespace="cloudnode"):
    labels = {"app.kubernetes.io/name": "cloudnode", "app.kubernetes.io/component": "cloud-controller-manager"}
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "cloudnode-cloud-controller-manager", "namespace": namespace},
            "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"containers": [{"name": "cloud-controller-manager", "image": "x"}]}}}}


def test_handoff(t, tmp, namespace="cloudnode"):
    with FakeCloud(os.path.join(tmp, "fc"), platform="hetzner") as c, kube_server(os.path.join(tmp, "kube")) as k:
        root = os.path.join(tmp, "root")
        os.makedirs(os.path.join(root, "etc", "cloudnode"))
        secrets = os.path.join(root, "etc", "kubernetes", "bootstrap-secrets")
        os.makedirs(secrets)
        shutil.copy(k.kubeconfig, os.path.join(secrets, "kubeconfig"))
        with open(os.path.join(root, "etc", "cloudnode", "cloudnode.yaml"), "w") as f:
            json.dump({"platform": "hetzner", "role": "bootstrap", "metadata": {"endpoint": c.url},
                       "images": {"cloudControllerManager": "example.com/init:1"}}, f)
        k.api("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                            "metadata": {"name": namespace}})
        err_path = os.path.join(tmp, "agent.err")
        with open(err_path, "w") as err:
            p = subprocess.Popen([AGENT, "--root", root], stdout=subprocess.DEVNULL, stderr=err,
                                 env=dict(os.environ, CLOUDNODE_LOG_TARGET="console"))
        try:
            t.ok(wait_for(lambda: os.path.exists(os.path.join(root, POD))), "static pod written")
            st, body = k.api("POST", DEPLOY_PATH % namespace, deployment(namespace))
            t.ok(st in (200, 201), "Deployment created", (st, body))
            time.sleep(1.5)
            t.ok(p.poll() is None and os.path.exists(os.path.join(root, POD)),
                 "no available replica: the agent waits, the static pod stays")
            st, body = k.api("PATCH", DEPLOY_PATH % namespace + "/cloudnode-cloud-controller-manager/status",
                             {"status": {"replicas": 1, "readyReplicas": 1, "availableReplicas": 1}},
                             content_type="application/merge-patch+json")
            t.ok(st == 200, "Deployment status: one available replica", (st, body))
            t.ok(wait_for(lambda: p.poll() is not None), "the agent exits after the hand-over")
        finally:
            if p.poll() is None:
                p.terminate()
                p.wait()
        with open(err_path) as f:
            err = f.read()
        t.eq(p.returncode, 0, "exit 0") or t.diag(err)
        t.ok(not os.path.exists(os.path.join(root, POD)), "static pod manifest removed")
        t.ok(os.path.exists(os.path.join(root, "etc/kubernetes/bootstrap-configs/cloud.conf")), "cloud.conf kept")
        t.ok("handed over" in err and (namespace + "/cloudnode-cloud-controller-manager") in err,
             "hand-over logged with the Deployment's namespace", err)
        reads = [a for a in k.audit() if "deployments" in a.get("path", "") and a.get("verb") in ("get", "list", "watch")]
        t.ok(len(reads) <= 4 and any(a.get("verb") == "watch" for a in reads),
             "followed by list+watch, not polling (%d reads)" % len(reads), reads)


def test_sigterm(t, tmp):
    """Waiting for a Deployment that never comes: SIGTERM ends the agent cleanly, the pod stays."""
    with FakeCloud(os.path.join(tmp, "fc2"), platform="hetzner") as c, kube_server(os.path.join(tmp, "kube2")) as k:
        root = os.path.join(tmp, "root2")
        os.makedirs(os.path.join(root, "etc", "cloudnode"))
        secrets = os.path.join(root, "etc", "kubernetes", "bootstrap-secrets")
        os.makedirs(secrets)
        shutil.copy(k.kubeconfig, os.path.join(secrets, "kubeconfig"))
        with open(os.path.join(root, "etc", "cloudnode", "cloudnode.yaml"), "w") as f:
            json.dump({"platform": "hetzner", "role": "control-plane", "metadata": {"endpoint": c.url},
                       "images": {"cloudControllerManager": "example.com/init:1"}}, f)
        p = subprocess.Popen([AGENT, "--root", root], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             env=dict(os.environ, CLOUDNODE_LOG_TARGET="console"))
        t.ok(wait_for(lambda: os.path.exists(os.path.join(root, POD))), "static pod written (control-plane)")
        time.sleep(0.5)
        conf = os.path.join(root, "etc/kubernetes/bootstrap-configs/cloud.conf")
        # SIGHUP: a broken config is refused and the files stay; a good one is applied.
        with open(os.path.join(root, "etc", "cloudnode", "cloudnode.yaml"), "w") as f:
            f.write("platform: hetzner\nrole: control-plane\nbogus: 1\n")
        before = open(conf).read()
        p.send_signal(signal.SIGHUP)
        time.sleep(1)
        t.ok(p.poll() is None and open(conf).read() == before, "SIGHUP with a broken config: kept running, files kept")
        with open(os.path.join(root, "etc", "cloudnode", "cloudnode.yaml"), "w") as f:
            json.dump({"platform": "hetzner", "role": "control-plane", "metadata": {"endpoint": c.url},
                       "images": {"cloudControllerManager": "example.com/init:1"},
                       "cloudConfig": {"Global": {"KubernetesClusterID": "reloaded"}}}, f)
        p.send_signal(signal.SIGHUP)
        t.ok(wait_for(lambda: "KubernetesClusterID = reloaded" in open(conf).read(), 10) and p.poll() is None,
             "SIGHUP: config re-read, cloud.conf rewritten, still waiting to hand over")
        p.terminate()
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        t.eq(p.returncode, 0, "SIGTERM: clean exit")
        t.ok(os.path.exists(os.path.join(root, POD)), "static pod kept when not handed over")


def test_no_provider_no_wait(t, tmp):
    """file (bare metal) has no cluster-mode provider: no static pod (whose initializer would exit
    and crash-loop), so daemon mode has nothing to hand over and ends after its pass (exit 0)
    without reading any kubeconfig."""
    root = os.path.join(tmp, "root3")
    os.makedirs(os.path.join(root, "etc", "cloudnode"))
    with open(os.path.join(root, "etc", "cloudnode", "metadata.yaml"), "w") as f:
        json.dump({"instanceID": "node-3", "hostname": "node-3", "ipv4Private": "10.0.0.3"}, f)
    with open(os.path.join(root, "etc", "cloudnode", "cloudnode.yaml"), "w") as f:
        json.dump({"platform": "file", "role": "bootstrap",
                   "images": {"cloudControllerManager": "example.com/init:1"}}, f)
    p = subprocess.run([AGENT, "--root", root], capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, CLOUDNODE_LOG_TARGET="console"))
    t.ok(p.returncode == 0 and not os.path.exists(os.path.join(root, POD)) and
         "no cluster-mode provider" in p.stderr and
         os.path.exists(os.path.join(root, "etc/kubernetes/bootstrap-configs/cloud.conf")),
         "file bootstrap, daemon mode: no static pod, exit 0 after the pass", p.stderr)


def main():
    t = Tap()
    with tempfile.TemporaryDirectory() as tmp:
        t.run(test_handoff, tmp)
        # The openshift overlay installs the operand into openshift-cloudnode: followed there too.
        t.run(test_handoff, os.path.join(tmp, "openshift"), "openshift-cloudnode")
        t.run(test_sigterm, tmp)
        t.run(test_no_provider_no_wait, tmp)
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
