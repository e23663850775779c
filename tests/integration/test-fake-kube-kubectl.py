#!/usr/bin/env python3
"""tests/fake-kube-apiserver driven by a real client, kubectl: discovery, create from YAML,
get -o json, patch with each patch type, label, apply, server-side dry run, delete with a
finalizer, wait for conditions and deletion, namespaces."""
import base64
import json
import os
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
import clusterctl  # noqa: E402
from cntap import Tap, src, wait_for  # noqa: E402
from fakekubeclient import kubectl_minor, run_with_server  # noqa: E402

NODE_YAML = """apiVersion: v1
kind: Node
metadata:
  name: worker-1
  labels:
    kubernetes.io/hostname: worker-1
spec:
  taints:
  - key: node.cloudprovider.kubernetes.io/uninitialized
    value: "true"
    effect: NoSchedule
"""

DEPLOY_YAML = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: apps
spec:
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: web
        image: registry.example/web:1.0
        env:
        - {name: A, value: "1"}
"""


def node_json(k):
    r = k.kubectl("get", "node", "worker-1", "-o", "json")
    return json.loads(r.stdout) if r.returncode == 0 else None


def test_table(t, k):
    r = k.kubectl("get", "nodes")
    t.eq((r.returncode, r.stdout, r.stderr.strip()), (0, "", "No resources found"),
         "kubectl get of an empty cluster-scoped list (server-side Table)")
    k.api("POST", "/api/v1/nodes", {"metadata": {"name": "cp-0", "labels": {"node-role.kubernetes.io/control-plane": ""}},
                                    "spec": {"unschedulable": True}})
    k.api("PATCH", "/api/v1/nodes/cp-0/status", {"status": {"conditions": [{"type": "Ready", "status": "True"}],
                                                            "nodeInfo": {"kubeletVersion": "v1.32.1"}}},
          "application/merge-patch+json")
    r = k.kubectl("get", "nodes", "--no-headers")
    t.eq(r.stdout.split(), ["cp-0", "Ready,SchedulingDisabled", "control-plane", r.stdout.split()[3], "v1.32.1"],
         "node columns as the real server prints them")
    r = k.kubectl("get", "ns", "default")
    t.eq(r.stdout.splitlines()[0].split(), ["NAME", "STATUS", "AGE"], "namespace columns")
    k.api("DELETE", "/api/v1/nodes/cp-0")


def test_node(t, k):
    d = k.state_dir
    f = os.path.join(d, "node.yaml")
    with open(f, "w") as fp:
        fp.write(NODE_YAML)
    r = k.kubectl("create", "-f", f)
    t.eq((r.returncode, r.stdout.strip()), (0, "node/worker-1 created"), "kubectl create -f node.yaml", )
    n = node_json(k)
    t.eq(n["spec"]["taints"][0]["key"], "node.cloudprovider.kubernetes.io/uninitialized", "get -o json shows the taint")
    r = k.kubectl("patch", "node", "worker-1", "--type=merge", "-p",
                  json.dumps({"spec": {"providerID": "hetzner://42"}}))
    t.eq(r.returncode, 0, "patch --type=merge", )
    r = k.kubectl("patch", "node", "worker-1", "--type=json", "-p", json.dumps(
        [{"op": "test", "path": "/spec/taints/0/key", "value": "node.cloudprovider.kubernetes.io/uninitialized"},
         {"op": "remove", "path": "/spec/taints/0"}]))
    t.eq(r.returncode, 0, "patch --type=json with test")
    r = k.kubectl("patch", "node", "worker-1", "--type=strategic", "-p",
                  json.dumps({"metadata": {"labels": {"node.kubernetes.io/instance-type": "cx22"}}}))
    t.eq(r.returncode, 0, "patch --type=strategic")
    ready = {"status": {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                        "lastHeartbeatTime": "2024-01-01T00:00:00Z",
                                        "lastTransitionTime": "2024-01-01T00:00:00Z"}]}}
    if kubectl_minor() >= 24:
        r = k.kubectl("patch", "node", "worker-1", "--subresource=status", "--type=merge", "-p", json.dumps(ready))
        t.eq(r.returncode, 0, "patch --subresource=status")
    else:
        t.skip("patch --subresource=status", "kubectl 1.%d has no --subresource (1.24 and later)" % kubectl_minor())
        st, _ = k.api("PATCH", "/api/v1/nodes/worker-1/status", ready, "application/merge-patch+json")
        t.eq(st, 200, "the Ready condition through nodes/status")
    r = k.kubectl("label", "node", "worker-1", "topology.kubernetes.io/zone=fsn1-dc14")
    t.eq((r.returncode, r.stdout.strip()), (0, "node/worker-1 labeled"), "kubectl label")
    r = k.kubectl("label", "node", "worker-1", "bad label=x")
    t.ok(r.returncode != 0, "kubectl label with an invalid key fails")
    # The API server's own not-ready taint (admission plugin TaintNodesByCondition) goes once the
    # Node is Ready (the node lifecycle controller), after the patches.
    wait_for(lambda: not node_json(k)["spec"].get("taints"), 10)
    n = node_json(k)
    t.eq((n["spec"].get("providerID"), n["spec"].get("taints"), n["metadata"]["labels"].get(
        "node.kubernetes.io/instance-type"), n["metadata"]["labels"].get("topology.kubernetes.io/zone")),
         ("hetzner://42", None, "cx22", "fsn1-dc14"), "all patches applied")
    r = k.kubectl("patch", "node", "worker-1", "--type=merge", "-p", json.dumps({"spec": {"providerID": "x://1"}}))
    t.ok(r.returncode != 0 and "node updates may not change providerID" in r.stderr, "providerID change refused",
         r.stderr)
    r = k.kubectl("wait", "--for=condition=Ready", "node/worker-1", "--timeout=10s")
    t.eq(r.returncode, 0, "kubectl wait --for=condition=Ready")
    if kubectl_minor() >= 23:
        r = k.kubectl("wait", "--for=jsonpath={.spec.providerID}=hetzner://42", "node/worker-1", "--timeout=10s")
        t.eq(r.returncode, 0, "kubectl wait --for=jsonpath")
    else:
        t.skip("kubectl wait --for=jsonpath", "kubectl 1.%d has no --for=jsonpath (1.23 and later)" % kubectl_minor())
    r = k.kubectl("get", "nodes")
    t.ok(r.returncode == 0 and "worker-1" in r.stdout, "kubectl get nodes (table)", r.stdout + r.stderr)
    # Finalizer: delete leaves the node until the finalizer is gone; wait sees the deletion.
    r = k.kubectl("patch", "node", "worker-1", "--type=merge", "-p",
                  json.dumps({"metadata": {"finalizers": ["example.com/protect"]}}))
    r = k.kubectl("delete", "node", "worker-1", "--wait=false")
    t.eq(r.returncode, 0, "kubectl delete --wait=false")
    n = node_json(k)
    t.ok(n and n["metadata"].get("deletionTimestamp"), "node still there with deletionTimestamp")
    res = {}

    def wait():
        res["r"] = k.kubectl("wait", "--for=delete", "node/worker-1", "--timeout=20s")
    th = threading.Thread(target=wait)
    th.start()
    time.sleep(1.0)
    t.ok(th.is_alive(), "kubectl wait --for=delete blocks while the finalizer is there")
    r = k.kubectl("patch", "node", "worker-1", "--type=json", "-p",
                  json.dumps([{"op": "remove", "path": "/metadata/finalizers"}]))
    th.join(25)
    t.eq(res.get("r") and res["r"].returncode, 0, "kubectl wait --for=delete returns once the finalizer is removed")
    r = k.kubectl("get", "node", "worker-1")
    t.ok(r.returncode != 0 and "NotFound" in r.stderr, "node gone", r.stderr)


def test_apply(t, k):
    d = k.state_dir
    r = k.kubectl("create", "namespace", "apps")
    t.eq(r.returncode, 0, "kubectl create namespace")
    f = os.path.join(d, "deploy.yaml")
    with open(f, "w") as fp:
        fp.write(DEPLOY_YAML)
    r = k.kubectl("apply", "-f", f)
    t.eq((r.returncode, r.stdout.strip()), (0, "deployment.apps/web created"), "kubectl apply creates", )
    r = k.kubectl("apply", "-f", f)
    t.eq((r.returncode, r.stdout.strip()), (0, "deployment.apps/web unchanged"), "second apply: unchanged")
    with open(f, "w") as fp:
        fp.write(DEPLOY_YAML.replace("web:1.0", "web:1.1"))
    r = k.kubectl("apply", "-f", f)
    t.eq((r.returncode, r.stdout.strip()), (0, "deployment.apps/web configured"), "apply with a change: configured")
    r = k.kubectl("get", "deploy", "web", "-n", "apps", "-o", "json")
    dep = json.loads(r.stdout)
    c = dep["spec"]["template"]["spec"]["containers"]
    t.eq((len(c), c[0]["image"], c[0]["env"], dep["metadata"]["generation"]),
         (1, "registry.example/web:1.1", [{"name": "A", "value": "1"}], 2),
         "apply merged the container by name; generation 2")
    r = k.kubectl("set", "env", "deployment/web", "-n", "apps", "B=2")
    r = k.kubectl("get", "deploy", "web", "-n", "apps", "-o", "jsonpath={.spec.template.spec.containers[0].env}")
    t.eq(json.loads(r.stdout or "null"), [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
         "kubectl set env (strategic merge of env by name)")
    r = k.kubectl("patch", "deployment", "web", "-n", "apps", "-p", json.dumps({"spec": {"replicas": 3}}),
                  "--dry-run=server", "-o", "jsonpath={.spec.replicas}")
    t.eq((r.returncode, r.stdout), (0, "3"), "server-side dry run returns the result")
    r = k.kubectl("get", "deploy", "web", "-n", "apps", "-o", "jsonpath={.spec.replicas}")
    t.eq(r.stdout, "1", "dry run stored nothing")
    r = k.kubectl("create", "configmap", "cm1", "-n", "apps", "--from-literal=a=b")
    t.eq(r.returncode, 0, "kubectl create configmap")
    r = k.kubectl("create", "configmap", "cm1", "-n", "apps", "--from-literal=a=b")
    t.ok(r.returncode != 0 and 'configmaps "cm1" already exists' in r.stderr, "AlreadyExists through kubectl",
         r.stderr)
    r = k.kubectl("delete", "namespace", "apps", "--timeout=20s")
    t.eq(r.returncode, 0, "kubectl delete namespace waits until it is gone", )
    r = k.kubectl("get", "configmap", "cm1", "-n", "apps")
    t.ok(r.returncode != 0, "namespace contents deleted")


def test_scale(t, k):
    """The scale subresource, through kubectl scale and the API: kubectl 1.20 reads the Scale and
    PUTs it back, later versions PATCH it."""
    k.api("POST", "/api/v1/namespaces", {"metadata": {"name": "scaling"}})
    dep = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "s", "namespace": "scaling"},
           "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "s", "tier": "web"}},
                    "template": {"metadata": {"labels": {"app": "s", "tier": "web"}},
                                 "spec": {"containers": [{"name": "c", "image": "registry.example/s:1"}]}}}}
    st, _ = k.api("POST", "/apis/apps/v1/namespaces/scaling/deployments", dep)
    t.eq(st, 201, "deployment to scale created")
    path = "/apis/apps/v1/namespaces/scaling/deployments/s/scale"
    st, sc = k.api("GET", path)
    t.eq((st, sc.get("kind"), sc.get("apiVersion"), sc.get("spec"), sc.get("status")),
         (200, "Scale", "autoscaling/v1", {"replicas": 2}, {"replicas": 0, "selector": "app=s,tier=web"}),
         "GET scale: an autoscaling/v1 Scale with the replicas and the selector as a string")
    r = k.kubectl("scale", "deployment/s", "-n", "scaling", "--replicas=4")
    t.ok(r.returncode == 0 and r.stdout.strip() == "deployment.apps/s scaled", "kubectl scale", r.stdout + r.stderr)
    st, d = k.api("GET", "/apis/apps/v1/namespaces/scaling/deployments/s")
    t.eq((d["spec"]["replicas"], d["metadata"]["generation"]), (4, 2), "the Deployment has 4 replicas, generation 2")
    r = k.kubectl("scale", "deployment/s", "-n", "scaling", "--current-replicas=3", "--replicas=5")
    t.ok(r.returncode != 0, "kubectl scale --current-replicas refuses a wrong current count", r.stderr)
    stale = dict(sc, spec={"replicas": 7})
    st, r = k.api("PUT", path, stale)
    t.eq((st, r.get("reason")), (409, "Conflict"), "PUT of a Scale with a stale resourceVersion: 409")
    st, r = k.api("PATCH", path, {"spec": {"replicas": -1}}, "application/merge-patch+json")
    t.eq((st, r.get("reason")), (422, "Invalid"), "negative replicas: 422")
    st, r = k.api("PATCH", path, {"spec": {"replicas": 1}}, "application/merge-patch+json")
    t.eq((st, r.get("spec")), (200, {"replicas": 1}), "PATCH of the Scale answers the new Scale")
    st, d = k.api("GET", "/apis/apps/v1/namespaces/scaling/deployments/s")
    t.eq(d["spec"]["replicas"], 1, "the PATCH reached the Deployment")


def test_create_builtin(t, k):
    """kubectl's imperative creates of built-in kinds: kubectl 1.2x and later send these bodies in
    the protobuf encoding, which the server decodes from the field tables of k8s.io/api; the
    objects read back as JSON carry what was asked and the server's defaults."""
    k.api("POST", "/api/v1/namespaces", {"metadata": {"name": "imp"}})
    mark = len(k.audit())
    cmds = [
        ("create deployment", ["create", "deployment", "web", "-n", "imp", "--image=registry.example/web:1.2",
                               "--replicas=3", "--port=8080"]),
        ("run", ["run", "p1", "-n", "imp", "--image=registry.example/tool:2", "--labels=a=b,c=d",
                 "--env=X=1", "--port=9000", "--", "sleep", "10"]),
        ("create job", ["create", "job", "j1", "-n", "imp", "--image=registry.example/job:1", "--", "echo", "hi"]),
        ("create cronjob", ["create", "cronjob", "c1", "-n", "imp", "--image=registry.example/job:1",
                            "--schedule=*/5 * * * *"]),
        ("create service clusterip", ["create", "service", "clusterip", "s1", "-n", "imp", "--tcp=80:8080"]),
        ("create priorityclass", ["create", "priorityclass", "pc1", "--value=1000", "--description=batch"]),
        ("create role", ["create", "role", "r1", "-n", "imp", "--verb=get,list", "--resource=pods"]),
        ("create poddisruptionbudget", ["create", "pdb", "pdb1", "-n", "imp", "--selector=app=web",
                                        "--min-available=2"]),
    ]
    # kubectl before 1.21 creates CronJobs as batch/v1beta1 and PodDisruptionBudgets as
    # policy/v1beta1, versions removed from the API in 1.25 (as here).
    old = {"create cronjob", "create poddisruptionbudget"} if kubectl_minor() < 21 else set()
    for name, args in cmds:
        if name in old:
            t.skip("kubectl " + name, "kubectl 1.%d creates it in an API version removed in 1.25" % kubectl_minor())
            continue
        r = k.kubectl(*args)
        t.ok(r.returncode == 0 and "created" in r.stdout, "kubectl " + name, r.stdout + r.stderr)
    def audited_creates():
        return [a for a in k.audit()[mark:] if a["verb"] == "create" and a["resource"] != "namespaces"]

    # The audit record of a request follows its response: the last create's may come a moment
    # after kubectl has returned.
    creates = wait_for(lambda: len(audited_creates()) >= len(cmds) - len(old) and audited_creates(), 10) \
        or audited_creates()
    sent = sorted((a["resource"], a["contentType"].split(";")[0]) for a in creates)
    t.diag("kubectl 1.%d sent: %s" % (kubectl_minor(), ", ".join("%s as %s" % x for x in sent)))
    if kubectl_minor() >= 26:
        # kubectl run builds its Pod through the generic client, which sends JSON.
        t.ok(all(ct == "application/vnd.kubernetes.protobuf" for res, ct in sent if res != "pods") and len(sent) > 1,
             "kubectl 1.%d sent every typed create as protobuf" % kubectl_minor(), sent)
    t.eq(sorted(a["code"] for a in creates), [201] * (len(cmds) - len(old)), "every create answered 201")

    _, d = k.api("GET", "/apis/apps/v1/namespaces/imp/deployments/web")
    c = (d.get("spec", {}).get("template", {}).get("spec", {}).get("containers") or [{}])[0]
    t.eq((d.get("spec", {}).get("replicas"), d.get("spec", {}).get("selector"), c.get("image"), c.get("ports"),
          c.get("imagePullPolicy"), d.get("spec", {}).get("strategy", {}).get("type")),
         (3, {"matchLabels": {"app": "web"}}, "registry.example/web:1.2", [{"containerPort": 8080, "protocol": "TCP"}],
          "IfNotPresent", "RollingUpdate"), "the Deployment as asked, with defaults")
    _, p = k.api("GET", "/api/v1/namespaces/imp/pods/p1")
    c = (p.get("spec", {}).get("containers") or [{}])[0]
    t.eq((p.get("metadata", {}).get("labels"), c.get("args"), c.get("env"), c.get("ports"), p.get("spec", {}).get("restartPolicy")),
         ({"a": "b", "c": "d"}, ["sleep", "10"], [{"name": "X", "value": "1"}], [{"containerPort": 9000, "protocol": "TCP"}],
          "Always"), "the Pod as asked: labels, args, env, port")
    _, j = k.api("GET", "/apis/batch/v1/namespaces/imp/jobs/j1")
    js = j.get("spec", {})
    uid = j.get("metadata", {}).get("uid")
    t.eq((js.get("template", {}).get("spec", {}).get("containers", [{}])[0].get("command"),
          js.get("template", {}).get("spec", {}).get("restartPolicy"), js.get("backoffLimit"), js.get("completions"),
          js.get("selector")),
         (["echo", "hi"], "Never", 6, 1, {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}),
         "the Job as asked, with the defaults and the selector the server generates")
    if not old:
        _, cj = k.api("GET", "/apis/batch/v1/namespaces/imp/cronjobs/c1")
        t.eq((cj.get("spec", {}).get("schedule"), cj.get("spec", {}).get("concurrencyPolicy")), ("*/5 * * * *", "Allow"),
             "the CronJob's schedule and defaults")
    _, svc = k.api("GET", "/api/v1/namespaces/imp/services/s1")
    t.eq([(x.get("port"), x.get("targetPort")) for x in svc.get("spec", {}).get("ports", [])], [(80, 8080)],
         "the Service port and target port (an IntOrString)")
    _, pc = k.api("GET", "/apis/scheduling.k8s.io/v1/priorityclasses/pc1")
    t.eq((pc.get("value"), pc.get("description"), pc.get("preemptionPolicy")), (1000, "batch", "PreemptLowerPriority"),
         "the PriorityClass")
    if not old:
        _, pdb = k.api("GET", "/apis/policy/v1/namespaces/imp/poddisruptionbudgets/pdb1")
        t.eq(pdb.get("spec", {}).get("minAvailable"), 2, "the PodDisruptionBudget's minAvailable")


def test_rollout_status(t, k):
    """kubectl rollout status follows the Deployment's status, as the deployment controller (here:
    the test) writes it, and returns once the new replicas are updated and available."""
    k.api("POST", "/api/v1/namespaces", {"metadata": {"name": "roll"}})
    r = k.kubectl("create", "deployment", "app", "-n", "roll", "--image=registry.example/app:1", "--replicas=2")
    t.ok(r.returncode == 0, "deployment created", r.stderr)
    proc = k.kubectl_popen("rollout", "status", "deployment/app", "-n", "roll", "--timeout=30s")
    out = []
    reader = threading.Thread(target=lambda: out.extend(iter(proc.stdout.readline, "")), daemon=True)
    reader.start()

    def said(text):
        deadline = time.monotonic() + 20
        while not any(text in line for line in out):
            if time.monotonic() > deadline or (proc.poll() is not None and not reader.is_alive()):
                return False
            time.sleep(0.05)
        return True
    path = "/apis/apps/v1/namespaces/roll/deployments/app/status"
    st, d = k.api("GET", "/apis/apps/v1/namespaces/roll/deployments/app")
    gen = d["metadata"]["generation"]
    st, _ = k.api("PATCH", path, {"status": {"observedGeneration": gen, "replicas": 2, "updatedReplicas": 1,
                                             "availableReplicas": 0, "unavailableReplicas": 2}},
                  "application/merge-patch+json")
    t.eq(st, 200, "status: 1 of 2 updated")
    t.ok(said("1 out of 2 new replicas have been updated"), "rollout status reports 1 of 2 updated and waits",
         "".join(out))
    t.ok(proc.poll() is None, "and has not returned")
    st, _ = k.api("PATCH", path, {"status": {"observedGeneration": gen, "replicas": 2, "updatedReplicas": 2,
                                             "readyReplicas": 2, "availableReplicas": 2, "unavailableReplicas": None,
                                             "conditions": [{"type": "Available", "status": "True",
                                                             "reason": "MinimumReplicasAvailable"}]}},
                  "application/merge-patch+json")
    t.eq(st, 200, "status: 2 of 2 updated and available")
    try:
        rc = proc.wait(timeout=30)
    except Exception:
        proc.kill()
        rc = None
    reader.join(5)
    text = "".join(out)
    t.ok(rc == 0 and "successfully rolled out" in text, "kubectl rollout status returns: rolled out", text)


def test_project_manifests(t, k):
    """The project's own kustomizations apply cleanly, as they must on a real cluster (the Cluster
    API provider components after clusterctl's variable substitution)."""
    found = False
    for overlay in ("base", "overlays/capi", "overlays/single-node"):
        path = src("manifests", *overlay.split("/"))
        if not os.path.exists(os.path.join(path, "kustomization.yaml")):
            continue
        found = True
        r = k.kubectl("kustomize", path)
        if r.returncode != 0:
            t.ok(False, "kubectl kustomize %s" % overlay, r.stderr)
            continue
        text = r.stdout
        if overlay == "overlays/capi":
            text = clusterctl.substitute(text, {"CLOUDNODE_B64ENCODED_CLOUD_CONF":
                                                base64.b64encode(b"[Global]\ntoken = x\n").decode()})
        out = os.path.join(k.state_dir, "rendered.yaml")
        with open(out, "w") as f:
            f.write(text)
        r = k.kubectl("apply", "-f", out)
        t.ok(r.returncode == 0 and not r.stderr.strip(), "kubectl apply of manifests/%s" % overlay, r.stderr)
    if not found:
        t.bail_out("no manifests/*/kustomization.yaml found")


def main():
    t = Tap()
    run_with_server(t, (test_table, test_node, test_apply, test_scale, test_create_builtin, test_rollout_status,
                        test_project_manifests))
    sys.exit(t.done())


main()
