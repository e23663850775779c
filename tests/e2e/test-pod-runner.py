#!/usr/bin/env python3
"""The pod runner (tests/pylib/podrunner.py) plays the kubelet and the deployment controller for
the fake API server: Deployment pods from the built images with their service account, env,
ConfigMap volumes and probes, status written back, exited containers restarted with back-off and
counted, liveness failures restarting the container, a changed template rolled out, static pods
from a node's manifests directory with their mirror Pods."""
import json
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
import cnpodman  # noqa: E402
from cnproc import free_port  # noqa: E402
from cntap import Tap, src, wait_for  # noqa: E402
from fakekubeclient import FakeKube  # noqa: E402
from podrunner import PodNode, PodRunner  # noqa: E402

NS = "cloudnode"
SA = "cloudnode-cloud-controller-manager"


def image(name):
    return next((r for r in cnpodman.built_images() if "/%s:" % name in r), None)


def deployment(name, img, args, replicas=1, probes=None, env=None):
    c = {"name": "cloud-controller-manager", "image": img, "command": ["/usr/bin/cloudnode-initializer"],
         "args": args, "env": env or [],
         "volumeMounts": [{"name": "cloud-config", "mountPath": "/etc/cloudnode/config", "readOnly": True}],
         "securityContext": {"readOnlyRootFilesystem": True, "allowPrivilegeEscalation": False,
                             "capabilities": {"drop": ["ALL"]}}}
    c.update(probes or {})
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": NS},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"serviceAccountName": SA, "hostNetwork": True, "containers": [c],
                                           "volumes": [{"name": "cloud-config", "configMap": {
                                               "name": "cloud-conf",
                                               "items": [{"key": "cloud.conf", "path": "cloud.conf"}]}}]}}}}


def status(k, name):
    code, d = k.api("GET", "/apis/apps/v1/namespaces/%s/deployments/%s" % (NS, name))
    return (d or {}).get("status", {}) if code == 200 else {}


def pods_of(k, prefix, ns=NS):
    code, body = k.api("GET", "/api/v1/namespaces/%s/pods" % ns)
    return [p for p in (body or {}).get("items", []) if p["metadata"]["name"].startswith(prefix)]


def main():
    t = Tap()
    why = cnpodman.usable()
    if why:
        t.skip_all(why)
    img = image("cloudnode-initializer")
    if not img or not cnpodman.inspect(img):
        t.skip_all("the initializer image is not built (make images)")
    tmp = tempfile.mkdtemp(prefix="cn-podrunner-")
    rbac = [src("manifests", "operand", "cluster-initializer-rbac.yaml")]
    k = FakeKube(os.path.join(tmp, "kube"), rbac=rbac).start()
    root = os.path.join(tmp, "node")
    runner = PodRunner(k, os.path.join(tmp, "runner"), {"pr-node": PodNode("pr-node", root=root)},
                       backoff=(1.0, 4.0))
    try:
        k.api("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        k.api("POST", "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {
            "name": "pr-node", "labels": {"kubernetes.io/hostname": "pr-node"}}})
        # As a kubelet: Ready, so that the API server's not-ready taint goes.
        k.api("PATCH", "/api/v1/nodes/pr-node/status",
              {"status": {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]}},
              "application/merge-patch+json")
        k.api("POST", "/api/v1/namespaces/%s/configmaps" % NS, {
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cloud-conf"},
            "data": {"cloud.conf": "[Global]\ntoken = t\nendpoint = http://127.0.0.1:9/v1\n"}})
        port = free_port()
        ok = deployment("ok", img, ["--cloud-provider=hetzner", "--cloud-config=/etc/cloudnode/config/cloud.conf",
                                    "--controllers=cloud-node", "--leader-elect=true",
                                    "--leader-elect-resource-name=$(LEASE)", "--port=%d" % port],
                        env=[{"name": "LEASE", "value": "pod-runner-test"}],
                        probes={"livenessProbe": {"httpGet": {"path": "/healthz", "port": port},
                                                  "periodSeconds": 1, "failureThreshold": 2},
                                "readinessProbe": {"httpGet": {"path": "/readyz", "port": port},
                                                   "periodSeconds": 1}})
        crash = deployment("crash", img, ["--version"])
        dead_port = free_port()
        unhealthy = deployment("unhealthy", img, ["--cloud-provider=hetzner",
                                                  "--cloud-config=/etc/cloudnode/config/cloud.conf",
                                                  "--controllers=cloud-node", "--leader-elect=false", "--port=0"],
                               probes={"livenessProbe": {"tcpSocket": {"port": dead_port}, "initialDelaySeconds": 1,
                                                         "periodSeconds": 1, "failureThreshold": 2}})
        for d in (ok, crash, unhealthy):
            code, body = k.api("POST", "/apis/apps/v1/namespaces/%s/deployments" % NS, d)
            t.ok(code == 201, "Deployment %s created" % d["metadata"]["name"], body)
        runner.start()

        st = wait_for(lambda: status(k, "ok").get("availableReplicas") == 1 and status(k, "ok"), 60, 0.5)
        t.ok(st and st.get("updatedReplicas") == 1 and st.get("replicas") == 1,
             "a running, ready pod makes the Deployment available (replicas/updated/available 1)",
             json.dumps(status(k, "ok")))
        lease = wait_for(lambda: k.api("GET", "/apis/coordination.k8s.io/v1/namespaces/%s/leases/pod-runner-test"
                                       % NS)[0] == 200, 30, 0.5)
        t.ok(lease, "the container reaches the API server in-cluster (service-account token, CA, "
                    "KUBERNETES_SERVICE_HOST/PORT) and takes the lease named through $(VAR) expansion")
        users = {a.get("user") for a in k.audit()}
        t.ok("system:serviceaccount:%s:%s" % (NS, SA) in users, "its requests are made as its service account")
        pods = pods_of(k, "ok-")
        t.ok(len(pods) == 1 and pods[0]["spec"].get("nodeName") == "pr-node" and
             pods[0]["status"]["containerStatuses"][0]["restartCount"] == 0,
             "a Pod object is written with its node and restart count", json.dumps(pods)[:800])

        crashed = wait_for(lambda: runner.restarts().get(
            next((key for key in runner.restarts() if "/crash-" in key), ""), 0) >= 2, 30, 0.5)
        t.ok(crashed, "an exiting container is restarted and its restarts counted", runner.restarts())
        t.ok(wait_for(lambda: status(k, "crash").get("availableReplicas") == 0, 10, 0.2),
             "a crash-looping pod leaves the Deployment unavailable", json.dumps(status(k, "crash")))
        t.ok(any(p["status"]["containerStatuses"][0]["restartCount"] >= 1 for p in pods_of(k, "crash-")),
             "the restart count is written to the Pod")

        killed = wait_for(lambda: any(v >= 1 for key, v in runner.restarts().items() if "/unhealthy-" in key), 30, 0.5)
        t.ok(killed, "a failing liveness probe restarts the container", runner.restarts())
        t.ok(all(v == 0 for key, v in runner.restarts().items() if "/ok-" in key),
             "a passing liveness probe restarts nothing", runner.restarts())

        code, _ = k.api("PATCH", "/apis/apps/v1/namespaces/%s/deployments/ok" % NS,
                        [{"op": "add", "path": "/spec/template/spec/containers/0/args/-", "value": "-v=2"}],
                        "application/json-patch+json")
        rolled = wait_for(lambda: any("-v=2" in p["spec"]["containers"][0]["args"] for p in pods_of(k, "ok-")) and
                          status(k, "ok").get("updatedReplicas") == 1 and status(k, "ok").get("availableReplicas") == 1
                          and len(pods_of(k, "ok-")) == 1, 60, 0.5)
        t.ok(code == 200 and rolled, "a changed pod template is rolled out (old pod replaced, updated 1 available 1)",
             json.dumps(status(k, "ok")))

        # A static pod: the reference bootstrap pod's layout, with an admin kubeconfig as its secret.
        for d in ("etc/kubernetes/manifests", "etc/kubernetes/bootstrap-secrets", "etc/kubernetes/bootstrap-configs"):
            os.makedirs(os.path.join(root, d), exist_ok=True)
        shutil.copy(k.kubeconfig, os.path.join(root, "etc/kubernetes/bootstrap-secrets/kubeconfig"))
        with open(os.path.join(root, "etc/kubernetes/bootstrap-configs/cloud.conf"), "w") as f:
            f.write("[Global]\ntoken = t\nendpoint = http://127.0.0.1:9/v1\n")
        for f in ("bootstrap-secrets/kubeconfig", "bootstrap-configs/cloud.conf"):
            os.chmod(os.path.join(root, "etc/kubernetes", f), 0o644)
        with open(src("manifests", "bootstrap", "cloudnode-cloud-node-pod.yaml")) as f:
            text = f.read().replace("image: ghcr.io/cloudnode/cloudnode-initializer:0.1.0", "image: " + img)
        text = text.replace("--port=10267", "--port=%d" % free_port()).replace(
            "- --leader-elect=false", "- --leader-elect=false\n        - --cloud-provider=hetzner")
        static = os.path.join(root, "etc/kubernetes/manifests/cloudnode-cloud-node.yaml")
        with open(static, "w") as f:
            f.write(text)
        mirror = wait_for(lambda: [p for p in pods_of(k, "cloudnode-cloud-node-pr-node", "kube-system")
                                   if p["status"].get("phase") == "Running"], 30, 0.5)
        t.ok(mirror, "a static pod in the node's manifests directory runs and gets its mirror Pod")
        os.unlink(static)
        gone = wait_for(lambda: not pods_of(k, "cloudnode-cloud-node-pr-node", "kube-system") and
                        not any(key.startswith("kube-system/") for key in runner.restarts()), 30, 0.5)
        t.ok(gone, "removing the manifest stops the static pod and deletes its mirror Pod")
        t.ok(not any(v for key, v in runner.restarts().items() if key.startswith("kube-system/")),
             "the static pod ran without restarts")
        errs = [e for e in runner.errors if "/crash-" not in e and "/unhealthy-" not in e]
        t.ok(not errs, "the runner met no other error", "\n".join(errs))
        if t.failed:
            t.diag(runner.logs()[-4000:])
    finally:
        runner.stop()
        k.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
