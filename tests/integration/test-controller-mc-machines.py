#!/usr/bin/env python3
"""cloudnode-controller serving machine-controller's Machine API (cluster.k8s.io/v1alpha1) with its
Hetzner and OpenStack providers, against the fake API server (manifests/overlays/machine-controller's
CRDs and RBAC) and the fake cloud: a Machine becomes a server with the machine-controller finalizer,
spec.providerID and addresses, and status.nodeRef once its Node registers; deletion cordons the
Node, evicts its Pods through the eviction API (held back by a PodDisruptionBudget, DaemonSet Pods
left alone), deletes the server, the Node and the finalizer. secretKeyRef and configMapKeyRef
credentials, and their absence; an unsupported operating system and a reference to another
namespace are terminal errors with no server; SIGKILL at random moments never duplicates or
orphans a server, Hetzner's or OpenStack's."""
import calendar
import os
import random
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from cntap import Tap  # noqa: E402
from cntap import src  # noqa: E402
from fakecloud import HETZNER_TOKEN, OPENSTACK_USER  # noqa: E402
from mcmachines import (FINALIZER, MACHINEDEPLOYMENTS, MACHINESETS, MERGE, NODES, NS, PDBS, PODS, USER,  # noqa: E402
                        mc_env, wait_for)


def creates(env, mark, path):
    return [r for r in env.c.requests()[mark:] if r.get("method") == "POST" and r.get("path", "").endswith(path)]


def test_lifecycle_drain(t, env):
    ctl = env.controller()
    try:
        m = env.machine("w1", env.hetzner_spec())
        uid = m["metadata"]["uid"]
        t.ok(wait_for(lambda: env.provisioned("w1"), 40), "create -> server, providerID and addresses",
             ctl.output()[-3000:])
        o = env.get("w1")
        srv = env.servers(uid)
        t.eq(len(srv), 1, "exactly one server carries the Machine's UID")
        t.eq(o["spec"]["providerID"], "hcloud://%s" % srv[0]["id"] if srv else None, "spec.providerID names it")
        t.ok(FINALIZER in o["metadata"].get("finalizers", []), "machine-controller's finalizer")
        t.eq((srv[0].get("labels") or {}).get("my") if srv else None, "label", "cloudProviderSpec.labels on the server")
        t.eq(srv[0].get("user_data") if srv else None, "#cloud-config\nhostname: worker\n",
             "the user data of the annotated Secret")
        t.ok("nodeRef" not in (o.get("status") or {}), "no nodeRef before the Node exists")
        env.kubelet_registers("w1")
        t.ok(wait_for(lambda: ((env.get("w1") or {}).get("status") or {}).get("nodeRef", {}).get("name") == "w1", 30),
             "status.nodeRef once the Node with its providerID appears", ctl.output()[-2000:])

        # Pods: two of a budget that allows one disruption, one more of it elsewhere, a DaemonSet's.
        env.pod("web-0", "w1", labels={"app": "web"})
        env.pod("web-1", "w1", labels={"app": "web"})
        env.pod("web-2", "elsewhere", labels={"app": "web"})
        env.pod("ds-0", "w1", owner="DaemonSet")
        env.k.api("POST", PDBS % "default", {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                                             "metadata": {"name": "web"},
                                             "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}}})
        env.delete("w1")
        t.ok(wait_for(lambda: env.k.api("GET", NODES + "/w1")[1].get("spec", {}).get("unschedulable") is True, 30),
             "deletion cordons the Node", ctl.output()[-2000:])
        t.ok(wait_for(lambda: env.events("EvictionBlocked"), 40), "the budget holds the drain back (Event)",
             ctl.output()[-2000:])

        def terminating(name):
            return bool((env.k.api("GET", PODS % "default" + "/" + name)[1].get("metadata") or {})
                        .get("deletionTimestamp"))
        t.eq(sorted(n for n in ("web-0", "web-1") if terminating(n)).__len__(), 1,
             "one of the two Pods evicted, the other refused by the budget")
        time.sleep(1.0)
        t.eq(len(env.servers(uid)), 1, "the server stays while the drain is held back")
        t.ok(env.get("w1") is not None, "and so does the Machine")
        env.k.api("PATCH", PDBS % "default" + "/web", {"spec": {"minAvailable": 1}}, MERGE)
        env.pod("web-3", "elsewhere", labels={"app": "web"})
        t.ok(wait_for(lambda: env.gone("w1"), 60), "once the budget allows: drained, server deleted, finalizer removed",
             ctl.output()[-3000:])
        t.eq(env.servers(uid), [], "no server left behind")
        t.eq(env.k.api("GET", NODES + "/w1")[0], 404, "the Node is deleted")
        t.ok(terminating("web-0") and terminating("web-1"), "both Pods were evicted")
        t.ok(not terminating("ds-0"), "the DaemonSet's Pod is not evicted")
        audit = env.k.audit()
        t.eq([a["name"] for a in audit if a["user"] == USER and a["resource"] == "pods" and a["verb"] == "delete"], [],
             "no Pod deleted directly: evictions only")
        t.ok(all(a["code"] != 403 for a in audit if a["user"] == USER), "everything within the overlay's RBAC",
             [(a["verb"], a["resource"], a["namespace"]) for a in audit if a["user"] == USER and a["code"] == 403])
        out = ctl.output()
        t.ok("hcloud-test-token" not in out and "hostname: worker" not in out, "no token or user data in the log")
    finally:
        ctl.stop()


def test_node_metadata(t, env):
    """machine-controller's Node metadata: its owner label as soon as the Node is there; once it is
    Ready, the Machine's spec.metadata labels and annotations and spec.taints, added where the Node
    lacks them, never overwriting or removing what the Node has."""
    ctl = env.controller()
    try:
        m = env.machine("w6", env.hetzner_spec(),
                        metadata={"labels": {"pool": "gpu", "tier": "machine"}, "annotations": {"team": "ml"}},
                        taints=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"},
                                {"key": "kubelet-set", "value": "machine", "effect": "NoExecute"}])
        t.ok(wait_for(lambda: env.provisioned("w6"), 40), "provisioned", ctl.output()[-2000:])
        env.kubelet_registers("w6", ready=False, labels={"tier": "kubelet", "own": "yes"},
                              taints=[{"key": "kubelet-set", "value": "kubelet", "effect": "NoExecute"}])

        def node():
            return env.k.api("GET", NODES + "/w6")[1]

        def labels():
            return node()["metadata"].get("labels") or {}
        t.ok(wait_for(lambda: labels().get("machine-controller/owned-by") == m["metadata"]["uid"], 30),
             "a Node not Ready yet: machine-controller/owned-by with the Machine's UID", ctl.output()[-2000:])
        time.sleep(1.0)
        t.ok("pool" not in labels() and all(x["key"] != "dedicated" for x in node()["spec"].get("taints", [])),
             "but neither the Machine's labels nor its taints before it is Ready", node())
        env.node_becomes_ready("w6")
        t.ok(wait_for(lambda: labels().get("pool") == "gpu", 30), "Ready: the Machine's label the Node lacked",
             ctl.output()[-2000:])
        n = node()
        t.eq(n["metadata"]["labels"].get("tier"), "kubelet", "a label the Node had is not overwritten")
        t.eq(n["metadata"]["labels"].get("own"), "yes", "nor removed")
        t.eq(n["metadata"].get("annotations", {}).get("team"), "ml", "the Machine's annotation")
        t.eq(n["metadata"].get("annotations", {}).get("cluster.k8s.io/machine"), NS + "/w6",
             "cluster.k8s.io/machine names the Machine (cluster-autoscaler's)")
        # The API server's not-ready taint goes once the Node is Ready, from the node lifecycle
        # controller, some milliseconds after the Ready status: our write may come before it (the
        # taints it sends are the Node's then, not-ready included, and the lifecycle controller
        # removes that one after it), so the taints are looked at once they have settled.
        want = [("dedicated", "gpu", "NoSchedule"), ("kubelet-set", "kubelet", "NoExecute")]

        def taints():
            return sorted((x["key"], x.get("value"), x["effect"]) for x in node()["spec"].get("taints", []))
        wait_for(lambda: taints() == want, 10)
        t.eq(taints(), want, "the missing taint added; one of the same key and effect already there is kept as it is")
        t.ok(wait_for(lambda: env.events("LabelsAnnotationsTaintsUpdated"), 20), "an Event says so")
        # Someone removes a taint the Machine asks for: it is put back, as machine-controller does.
        env.k.api("PATCH", NODES + "/w6", {"spec": {"taints": [{"key": "kubelet-set", "value": "kubelet",
                                                                 "effect": "NoExecute"}]}}, MERGE)
        t.ok(wait_for(lambda: any(x["key"] == "dedicated" for x in node()["spec"].get("taints", [])), 30),
             "a removed taint of the Machine is added again", ctl.output()[-2000:])
        patches = [a for a in env.k.audit() if a["user"] == USER and a["resource"] == "nodes" and a["verb"] == "patch"
                   and a["name"] == "w6"]
        t.ok(len(patches) <= 4, "a handful of Node writes, not one per event", len(patches))
        env.delete("w6")
        t.ok(wait_for(lambda: env.gone("w6"), 40), "deleted", ctl.output()[-2000:])
        t.ok(all(a["code"] != 403 for a in env.k.audit() if a["user"] == USER), "within the overlay's RBAC")
    finally:
        ctl.stop()


def scrape(ctl):
    """The /metrics samples: {(name, frozenset of label pairs): value}."""
    import re
    out = {}
    for line in ctl.get("/metrics")[1].splitlines():
        m = re.match(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$', line)
        if m:
            labels = frozenset(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
            out[(m.group(1), labels)] = float(m.group(3))
    return out


def sample(ctl, metric, /, **labels):
    want = {(k, v) for k, v in labels.items()}
    found = [v for (n, ls), v in scrape(ctl).items() if n == metric and want <= ls]
    return found[0] if len(found) == 1 else None


def test_metrics(t, env):
    """machine-controller's metrics, with its names: machines_total by kubelet version, provider,
    os, size and location; each Machine's creation and deletion time; provisioning (to the Node's
    readiness) and deprovisioning durations; unexpected errors."""
    ctl = env.controller()
    try:
        t.ok(wait_for(lambda: sample(ctl, "machine_controller_machines_total") == 0.0, 20),
             "no Machine: machines_total 0, as machine-controller", ctl.output()[-2000:])
        t.eq(sample(ctl, "machine_controller_errors_total"), 0.0, "errors_total from 0")
        m = env.machine("w7", env.hetzner_spec())
        created = time.mktime(time.strptime(m["metadata"]["creationTimestamp"], "%Y-%m-%dT%H:%M:%SZ")) - time.timezone
        # One server create fails (a cloud error: retried, and counted as an error).
        env.c.fail({"method": "POST", "path": "^/v1/servers$", "status": 503, "count": 1})
        t.ok(wait_for(lambda: env.provisioned("w7"), 40), "provisioned after a failed create", ctl.output()[-2000:])
        t.ok(wait_for(lambda: (sample(ctl, "machine_controller_errors_total") or 0) >= 1, 10),
             "the failed create counts in machine_controller_errors_total")
        t.eq(sample(ctl, "machine_controller_machines_total", kubelet_version="1.33.4", provider="hetzner", os="ubuntu",
                    size="cx22", location="fsn1"), 1.0,
             "machines_total{kubelet_version, provider, os, size, location}")
        t.eq(sample(ctl, "machine_controller_machine_created", machine="w7"), created, "machine_created: the creation time")
        t.eq(sample(ctl, "machine_controller_provisioning_time_seconds_count"), 0.0, "not provisioned before its Node")
        env.kubelet_registers("w7")
        t.ok(wait_for(lambda: any(c.get("type") == "Ready" and c.get("status") == "True"
                                  for c in (env.get("w7").get("status") or {}).get("conditions", [])), 30),
             "the Machine gets machine-controller's condition Ready once its Node is", ctl.output()[-2000:])
        t.ok(wait_for(lambda: sample(ctl, "machine_controller_provisioning_time_seconds_count") == 1.0, 10),
             "and one provisioning time is observed")
        t.eq(sample(ctl, "machine_controller_provisioning_time_seconds_bucket", le="32"), 1.0,
             "in machine-controller's first bucket (32 s)")
        env.delete("w7")
        t.ok(wait_for(lambda: sample(ctl, "machine_controller_machine_deleted", machine="w7") is not None, 20),
             "machine_deleted while it is being deleted", ctl.output()[-2000:])
        t.ok(wait_for(lambda: env.gone("w7"), 40), "deleted", ctl.output()[-2000:])
        t.ok(wait_for(lambda: sample(ctl, "machine_controller_deprovisioning_time_seconds_count") == 1.0, 10),
             "one deprovisioning time observed")
        t.ok(wait_for(lambda: sample(ctl, "machine_controller_machine_created", machine="w7") is None and
                      sample(ctl, "machine_controller_machines_total") == 0.0, 10),
             "a gone Machine leaves the per-Machine series and the count")
        t.promtool_check_metrics(ctl.get("/metrics")[1])
    finally:
        env.c.clear_faults()
        ctl.stop()


def test_skip_eviction(t, env):
    ctl = env.controller()
    try:
        env.machine("w2", env.hetzner_spec(), annotations={"kubermatic.io/skip-eviction": "true"})
        t.ok(wait_for(lambda: env.provisioned("w2"), 40), "provisioned", ctl.output()[-2000:])
        env.kubelet_registers("w2")
        env.pod("busy", "w2", labels={"app": "busy"})
        env.k.api("POST", PDBS % "default", {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                                             "metadata": {"name": "busy"},
                                             "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "busy"}}}})
        t.ok(wait_for(lambda: (env.get("w2").get("status") or {}).get("nodeRef"), 30), "nodeRef")
        env.delete("w2")
        t.ok(wait_for(lambda: env.gone("w2"), 40), "kubermatic.io/skip-eviction: deleted without a drain",
             ctl.output()[-2000:])
        evictions = [a for a in env.k.audit() if a["user"] == USER and a["subresource"] == "eviction"
                     and a["name"] == "busy"]
        t.eq(evictions, [], "and no eviction was asked for")
    finally:
        ctl.stop()


def test_references(t, env):
    ctl = env.controller()
    try:
        spec = env.hetzner_spec()
        spec["cloudProviderSpec"]["token"]["secretKeyRef"]["name"] = "later"
        uid = env.machine("w3", spec)["metadata"]["uid"]
        t.ok(wait_for(lambda: env.events("ReferenceMissing"), 30), "a missing Secret is reported (Event)",
             ctl.output()[-2000:])
        msg = env.events("ReferenceMissing")[0]["message"] if env.events("ReferenceMissing") else ""
        t.ok("later" in msg and "token" in msg, "naming the Secret and the key", msg)
        t.eq(env.servers(uid), [], "and nothing is created meanwhile")
        t.ok(not (env.get("w3").get("status") or {}).get("errorReason"), "not terminal: it may be created")
        env.secret("later", {"token": "hcloud-test-token"})
        t.ok(wait_for(lambda: env.provisioned("w3"), 60), "created once the Secret exists", ctl.output()[-2000:])
        env.delete("w3")
        t.ok(wait_for(lambda: env.gone("w3"), 40), "deleted")
        t.eq(env.servers(uid), [], "no server left")

        # A Secret of another namespace: refused before any read of it.
        env.secret("stolen", {"token": "hcloud-test-token"}, ns="default")
        spec = env.hetzner_spec()
        spec["cloudProviderSpec"]["token"] = {"secretKeyRef": {"namespace": "default", "name": "stolen", "key": "token"}}
        uid = env.machine("w4", spec)["metadata"]["uid"]

        def reason(n):
            return ((env.get(n) or {}).get("status") or {}).get("errorReason")
        t.eq(wait_for(lambda: reason("w4"), 30), "InvalidConfiguration", "another namespace's Secret: terminal")
        t.ok("only Secrets and ConfigMaps of the Machine's namespace" in env.get("w4")["status"].get("errorMessage", ""),
             "errorMessage says why", env.get("w4")["status"].get("errorMessage"))
        t.eq([a for a in env.k.audit() if a["user"] == USER and a["resource"] == "secrets" and a["namespace"] == "default"],
             [], "the controller never asked for it")
        t.eq(env.servers(uid), [], "no server")
        env.delete("w4")
        t.ok(wait_for(lambda: env.gone("w4"), 30), "a failed Machine is deleted cleanly")
    finally:
        ctl.stop()


def test_unsupported_os(t, env):
    ctl = env.controller()
    try:
        mark = len(env.c.requests())
        uid = env.machine("w5", env.hetzner_spec(os_name="flatcar"))["metadata"]["uid"]

        def status():
            return (env.get("w5") or {}).get("status") or {}
        t.eq(wait_for(lambda: status().get("errorReason"), 30), "InvalidConfiguration",
             "an operating system Hetzner does not offer: terminal")
        t.ok("flatcar" in status().get("errorMessage", ""), "errorMessage names it", status().get("errorMessage"))
        time.sleep(1.5)
        t.eq(creates(env, mark, "/v1/servers"), [], "no server create request")
        t.eq(env.servers(uid), [], "no server")
        t.eq(len([e for e in env.events("InvalidConfiguration") if e["involvedObject"]["name"] == "w5"]), 1,
             "one Warning Event, not repeated")
        # The human fixes the Machine and clears the error (no status subresource: one patch).
        env.k.api("PATCH", "/apis/cluster.k8s.io/v1alpha1/namespaces/%s/machines/w5" % NS,
                  {"spec": {"providerSpec": {"value": {"operatingSystem": "ubuntu"}}},
                   "status": {"errorReason": None, "errorMessage": None}}, MERGE)
        t.ok(wait_for(lambda: env.provisioned("w5"), 40), "fixed and cleared: the server is created",
             ctl.output()[-2000:])
        t.eq(len(env.servers(uid)), 1, "one server")
        env.delete("w5")
        t.ok(wait_for(lambda: env.gone("w5"), 30), "deleted cleanly")
        t.eq(env.servers(uid), [], "and its server")
    finally:
        ctl.stop()


def test_openstack(t, env):
    env.openstack_secret()
    env.configmap("machine-controller", {"securityGroup": "external-ssh"})
    ctl = env.controller()
    try:
        uid = env.machine("os1", env.openstack_spec())["metadata"]["uid"]
        t.ok(wait_for(lambda: env.provisioned("os1"), 60), "openstack: server from credentials in a Secret",
             ctl.output()[-3000:])
        srv = env.servers(uid)
        t.eq(len(srv), 1, "openstack: one server")
        t.eq(env.get("os1")["spec"]["providerID"], "openstack:///%s" % srv[0]["id"] if srv else None,
             "openstack: providerID")
        extra = srv[0].get("extra") or {} if srv else {}
        t.eq(extra.get("security_groups"), [{"name": "external-ssh"}], "openstack: the security group of the "
             "configMapKeyRef")
        t.eq((srv[0].get("labels") or {}).get("team") if srv else None, "infra", "openstack: tags as server metadata")
        t.eq(srv[0].get("user_data") if srv else None, "#cloud-config\nhostname: worker\n",
             "openstack: the user data of the annotated Secret")
        env.delete("os1")
        t.ok(wait_for(lambda: env.gone("os1"), 60), "openstack: deleted", ctl.output()[-2000:])
        t.eq(env.servers(uid), [], "openstack: no server left")
        t.ok("demo-password" not in ctl.output(), "openstack: no password in the log")
    finally:
        ctl.stop()


def kill_rounds(t, env, cloud, spec, rounds):
    """SIGKILL at random moments of a create and of a delete: never a second server, never one left."""
    seed = int(os.environ.get("CN_TEST_SEED", str(random.randrange(1 << 30))))
    t.diag("%s: random kill points: CN_TEST_SEED=%d" % (cloud, seed))
    rng = random.Random(seed)
    mark = len(env.c.requests())
    for i in range(rounds):
        name = "k%s%d" % (cloud[0], i)
        ctl = env.controller()
        uid = env.machine(name, spec())["metadata"]["uid"]
        time.sleep(rng.uniform(0.0, 1.5))  # the random moment itself
        ctl.kill()
        ctl = env.controller()
        try:
            t.ok(wait_for(lambda: env.provisioned(name), 60), "%s %s: provisioned after a SIGKILL (seed %d)" %
                 (cloud, name, seed), ctl.output()[-2000:])
            t.eq(len(env.servers(uid)), 1, "%s %s: exactly one server (seed %d)" % (cloud, name, seed))
            env.delete(name)
            time.sleep(rng.uniform(0.0, 1.0))
            ctl.kill()
        finally:
            ctl.stop()
        ctl = env.controller()
        try:
            t.ok(wait_for(lambda: env.gone(name), 60), "%s %s: deleted after a SIGKILL in the deletion (seed %d)" %
                 (cloud, name, seed), ctl.output()[-2000:])
            t.eq(env.servers(uid), [], "%s %s: no server left (seed %d)" % (cloud, name, seed))
        finally:
            ctl.stop()
    t.eq(len([r for r in env.c.requests()[mark:] if r.get("method") == "POST" and
              r.get("path", "").split("?")[0].endswith("/servers")]), rounds,
         "%s: one create request per Machine" % cloud)


def test_kill(t, env):
    kill_rounds(t, env, "hetzner", env.hetzner_spec, 4)


def test_kill_openstack(t, env):
    env.openstack_secret()
    env.configmap("machine-controller", {"securityGroup": "external-ssh"})
    kill_rounds(t, env, "openstack", env.openstack_spec, 3)


def test_machineset(t, env):
    ctl = env.controller()
    try:
        mark = len(env.c.requests())
        ms = env.machineset("ms1", env.hetzner_spec(), 2, policy="Newest")
        uid = ms["metadata"]["uid"]

        def names():
            return sorted(m["metadata"]["name"] for m in env.machines_of("MachineSet", uid))

        def provisioned(n):
            ms_ = env.machines_of("MachineSet", uid)
            return len(ms_) == n and all(env.provisioned(m["metadata"]["name"]) for m in ms_)
        t.ok(wait_for(lambda: provisioned(2), 60), "MachineSet replicas 2: two Machines, each with its server",
             ctl.output()[-3000:])
        first = names()
        t.ok(all(n.startswith("ms1-") for n in first), "named after the set", first)
        t.ok(wait_for(lambda: (env.k.api("GET", MACHINESETS + "/ms1")[1].get("status") or {}).get("replicas") == 2, 20),
             "status.replicas")
        # creationTimestamp has whole seconds: the third Machine must be younger by one at least.
        time.sleep(1.1)
        env.k.api("PATCH", MACHINESETS + "/ms1", {"spec": {"replicas": 3}}, MERGE)
        t.ok(wait_for(lambda: provisioned(3), 60), "scaled up to 3", ctl.output()[-2000:])

        def metric(name):
            for line in ctl.get("/metrics")[1].splitlines():
                if line.startswith(name + " ") or line.startswith(name + "{"):
                    return line
            return None
        t.ok(wait_for(lambda: metric("machine_controller_machines") == "machine_controller_machines 3", 20),
             "/metrics: machine_controller_machines counts the three Machines", metric("machine_controller_machines"))
        creates_line = next((line for line in ctl.get("/metrics")[1].splitlines()
                             if line.startswith("machine_controller_cloud_api_requests_total{") and
                             'operation="machine_create"' in line and 'result="ok"' in line), "")
        t.ok(creates_line.endswith(" 3") and 'provider="hetzner"' in creates_line,
             "and the cloud requests by provider, operation and result: three creates", creates_line)
        t.promtool_check_metrics(ctl.get("/metrics")[1])
        newest = [n for n in names() if n not in first][0]
        oldest = sorted(env.machines_of("MachineSet", uid), key=lambda m: m["metadata"]["creationTimestamp"])[0]
        marked = oldest["metadata"]["name"]
        env.k.api("PATCH", "/apis/cluster.k8s.io/v1alpha1/namespaces/%s/machines/%s" % (NS, marked),
                  {"metadata": {"annotations": {"cluster.k8s.io/delete-machine": "yes"}}}, MERGE)
        env.k.api("PATCH", MACHINESETS + "/ms1", {"spec": {"replicas": 2}}, MERGE)
        t.ok(wait_for(lambda: env.gone(marked), 60), "scaled down to 2: the Machine marked "
             "cluster.k8s.io/delete-machine goes first, even under Newest", ctl.output()[-2000:])
        t.ok(newest in names(), "and the newest stays")
        env.k.api("PATCH", MACHINESETS + "/ms1", {"spec": {"replicas": 1}}, MERGE)
        t.ok(wait_for(lambda: env.gone(newest), 60), "scaled down to 1: deletePolicy Newest removes the newest",
             ctl.output()[-2000:])
        env.k.api("PATCH", MACHINESETS + "/ms1", {"spec": {"replicas": 0}}, MERGE)
        t.ok(wait_for(lambda: not env.all_machines(), 60), "scaled to 0: no Machine left", ctl.output()[-2000:])
        t.eq([i for i in env.c.instances() if (i.get("labels") or {}).get("my") == "label"], [],
             "and no server left")
        t.eq(len(creates(env, mark, "/v1/servers")), 3, "three servers were ever created for three Machines")
        env.k.api("DELETE", MACHINESETS + "/ms1")
    finally:
        ctl.stop()


def test_deployment_min_ready_history(t, env):
    """minReadySeconds: a Machine is available only once its Node has been Ready that long;
    revisionHistoryLimit: old MachineSets at 0 beyond it are deleted once a rollout is complete;
    strategy Recreate, which machine-controller does not have, is refused."""
    ctl = env.controller()
    md = MACHINEDEPLOYMENTS + "/md-slow"
    try:
        env.machinedeployment("md-slow", env.hetzner_spec(), 1, minReadySeconds=4, revisionHistoryLimit=1)

        def status():
            return env.k.api("GET", md)[1].get("status") or {}

        def sets():
            return [x for x in env.k.api("GET", MACHINESETS)[1].get("items", [])
                    if x["metadata"]["name"].startswith("md-slow-") and not x["metadata"].get("deletionTimestamp")]
        t.ok(wait_for(lambda: sets() and sets()[0]["spec"].get("minReadySeconds") == 4, 30),
             "the MachineSet carries the deployment's minReadySeconds", ctl.output()[-2000:])

        def ready_one():
            env.kubelets()
            return status().get("readyReplicas") == 1
        t.ok(wait_for(ready_one, 60), "one Machine, its Node Ready", ctl.output()[-2000:])
        t.eq(status().get("availableReplicas"), 0, "but not available yet")
        t.ok(wait_for(lambda: status().get("availableReplicas") == 1, 20), "available after minReadySeconds",
             ctl.output()[-2000:])
        # The controller's clock is this one: available only once the Node's Ready condition is 4 s old.
        node = env.k.api("GET", NODES + "/" + env.available()[0]["status"]["nodeRef"]["name"])[1]
        since = calendar.timegm(time.strptime(node["status"]["conditions"][0]["lastTransitionTime"],
                                              "%Y-%m-%dT%H:%M:%SZ"))
        t.ok(time.time() >= since + 4, "and not before", time.time() - since)
        t.ok(wait_for(lambda: sample(ctl, "machine_deployment_available_replicas", name="md-slow", namespace=NS) == 1.0
                      and sample(ctl, "machine_deployment_replicas", name="md-slow", namespace=NS) == 1.0, 10),
             "machine_deployment_available_replicas and _replicas {name, namespace}")

        # Two rollouts: revisionHistoryLimit 1 keeps one old set.
        for change in ({"serverType": "cx32"}, {"labels": {"my": "label", "rollout": "2"}}):
            env.k.api("PATCH", md, {"spec": {"template": {"spec": {"providerSpec": {"value": {
                "cloudProviderSpec": change}}}}}}, MERGE)

            def rolled():
                env.kubelets()
                live = [m for m in env.all_machines() if not m["metadata"].get("deletionTimestamp")]
                cps = live[0]["spec"]["providerSpec"]["value"]["cloudProviderSpec"] if live else {}
                return (len(live) == 1 and all(cps.get(k) == v for k, v in change.items()) and
                        status().get("availableReplicas") == 1 and status().get("updatedReplicas") == 1 and
                        status().get("replicas") == 1)
            t.ok(wait_for(rolled, 120), "rolled over to %s" % change, ctl.output()[-3000:])
        t.ok(wait_for(lambda: len(sets()) == 2, 30), "revisionHistoryLimit 1: the current set and one old one",
             [(x["metadata"]["name"], x["metadata"]["annotations"]) for x in sets()])
        revs = sorted(x["metadata"]["annotations"]["machinedeployment.clusters.k8s.io/revision"] for x in sets())
        t.eq(revs, ["2", "3"], "the oldest (revision 1) is the one deleted")
        env.k.api("PATCH", md, {"spec": {"revisionHistoryLimit": 0}}, MERGE)
        t.ok(wait_for(lambda: len(sets()) == 1, 30), "revisionHistoryLimit 0: only the current set",
             ctl.output()[-2000:])
        env.k.api("PATCH", md, {"spec": {"replicas": 0}}, MERGE)
        t.ok(wait_for(lambda: not env.all_machines(), 90), "scaled to 0: no Machine left", ctl.output()[-2000:])

        env.machinedeployment("md-recreate", env.hetzner_spec(), 1, strategy={"type": "Recreate"})
        t.ok(wait_for(lambda: [e for e in env.events("InvalidSpec") if e["involvedObject"]["name"] == "md-recreate"], 30),
             "strategy Recreate: a Warning Event", ctl.output()[-2000:])
        ev = [e for e in env.events("InvalidSpec") if e["involvedObject"]["name"] == "md-recreate"]
        t.ok(ev and "RollingUpdate" in ev[0]["message"], "saying RollingUpdate is the one there is",
             ev[0]["message"] if ev else None)
        t.eq([x for x in env.k.api("GET", MACHINESETS)[1].get("items", [])
              if x["metadata"]["name"].startswith("md-recreate-")], [], "and no MachineSet for it")
        env.k.api("DELETE", MACHINEDEPLOYMENTS + "/md-recreate")
        env.k.api("DELETE", md)
        for x in env.k.api("GET", MACHINESETS)[1].get("items", []):
            env.k.api("DELETE", MACHINESETS + "/" + x["metadata"]["name"])
    finally:
        ctl.stop()


def test_example_hetzner(t, env):
    """examples/hetzner-machinedeployment.yaml applied as is with kubectl; the user puts the token in
    its Secret; then a rolling update of the template and kubectl scale to 0."""
    ctl = env.controller()
    md = MACHINEDEPLOYMENTS + "/hetzner-machinedeployment"
    try:
        mark = len(env.c.requests())
        r = env.k.kubectl("apply", "-f", src("examples", "hetzner-machinedeployment.yaml"))
        t.ok(r.returncode == 0, "kubectl apply -f examples/hetzner-machinedeployment.yaml", r.stdout + r.stderr)
        env.secret("machine-controller-hetzner", {"token": HETZNER_TOKEN})  # what the user fills in

        def status():
            return env.k.api("GET", md)[1].get("status") or {}

        def settled(server_type):
            env.kubelets()
            ms = [m for m in env.all_machines() if not m["metadata"].get("deletionTimestamp")]
            return (len(ms) == 1 and env.provisioned(ms[0]["metadata"]["name"]) and
                    ms[0]["spec"]["providerSpec"]["value"]["cloudProviderSpec"]["serverType"] == server_type and
                    len(env.available()) == 1 and status().get("availableReplicas") == 1 and
                    status().get("updatedReplicas") == 1)
        t.ok(wait_for(lambda: settled("cx22"), 90), "one Machine, its server and Node; status availableReplicas 1",
             ctl.output()[-3000:])
        first = env.all_machines()[0]
        t.eq(env.k.api("GET", md)[1]["metadata"].get("annotations", {}).get(
            "machinedeployment.clusters.k8s.io/revision"), "1", "revision 1")
        r = env.k.kubectl("-n", NS, "patch", "machinedeployment", "hetzner-machinedeployment", "--type=merge", "-p",
                          '{"spec":{"template":{"spec":{"providerSpec":{"value":{"cloudProviderSpec":'
                          '{"serverType":"cx32"}}}}}}}')
        t.ok(r.returncode == 0, "kubectl patch of the template's serverType", r.stderr)
        low = [1]

        def rolled():
            low[0] = min(low[0], len(env.available()))
            return settled("cx32")
        t.ok(wait_for(rolled, 120), "rolled over to cx32: a new Machine, then the old one gone",
             ctl.output()[-3000:])
        t.eq(low[0], 1, "maxUnavailable 0: never less than one available Machine during the rollover")
        t.ok(wait_for(lambda: env.gone(first["metadata"]["name"]), 60), "the old Machine is deleted (its server and Node "
             "first)", ctl.output()[-2000:])
        t.eq(env.k.api("GET", md)[1]["metadata"].get("annotations", {}).get(
            "machinedeployment.clusters.k8s.io/revision"), "2", "revision 2")
        sets = env.k.api("GET", MACHINESETS)[1].get("items", [])
        t.eq(sorted((s["spec"]["replicas"]) for s in sets if s["metadata"]["name"].startswith("hetzner-machinedeployment-")),
             [0, 1], "two MachineSets, the old one scaled to 0")
        r = env.k.kubectl("-n", NS, "scale", "machinedeployment", "hetzner-machinedeployment", "--replicas=0")
        t.ok(r.returncode == 0, "kubectl scale (the scale subresource) to 0", r.stdout + r.stderr)
        t.ok(wait_for(lambda: not env.all_machines(), 90), "no Machine left", ctl.output()[-2000:])
        t.eq([i for i in env.c.instances() if (i.get("labels") or {}).get("my") == "label"], [], "no server left")
        t.eq(len(creates(env, mark, "/v1/servers")), 2, "two servers were ever created")
    finally:
        ctl.stop()


def test_example_openstack(t, env):
    r = env.k.kubectl("apply", "-f", src("examples", "openstack-machinedeployment.yaml"))
    t.ok(r.returncode == 0, "kubectl apply -f examples/openstack-machinedeployment.yaml", r.stdout + r.stderr)
    env.secret("machine-controller-openstack", {      # what the user fills in
        "identityEndpoint": env.c.url + "/v3", "username": OPENSTACK_USER["name"],
        "password": OPENSTACK_USER["password"], "domainName": OPENSTACK_USER["domain"],
        "projectName": OPENSTACK_USER["project"], "region": "RegionOne"})
    # Started once the Secret is filled in: a create with the example's placeholder endpoint
    # fails for good (CreateError), and the Machine would not be retried.
    ctl = env.controller()
    try:
        def one():
            ms = env.all_machines()
            return len(ms) == 1 and env.provisioned(ms[0]["metadata"]["name"]) and ms[0]
        m = wait_for(one, 90)
        t.ok(m, "openstack example: a Machine with its server", ctl.output()[-3000:])
        srv = env.servers(m["metadata"]["uid"]) if m else []
        t.eq([(s.get("extra") or {}).get("security_groups") for s in srv], [[{"name": "external-ssh"}]],
             "with the ConfigMap's security group")
        r = env.k.kubectl("-n", NS, "scale", "machinedeployment", "openstack-machinedeployment", "--replicas=0")
        t.ok(r.returncode == 0 and wait_for(lambda: not env.all_machines(), 90), "scaled to 0: no Machine left",
             ctl.output()[-2000:])
        t.eq(env.servers(m["metadata"]["uid"]) if m else None, [], "no server left")
    finally:
        ctl.stop()


def test_flags(t):
    """Bad values of the flags: one line on stderr naming the flag, exit 2, before any connection."""
    from cntap import build
    import subprocess
    for flag, value in (("--machine-controller-namespace", ""), ("--machine-controller-skip-eviction-after", "bogus"),
                        ("--machine-controller-skip-eviction-after", "0"),
                        ("--machine-controller-user-data-secret", "")):
        p = subprocess.run([build("controller", "cloudnode-controller"), "run", "--namespace", "cloudnode",
                            "--kubeconfig", "/nonexistent", "%s=%s" % (flag, value)], capture_output=True, text=True)
        lines = [line for line in p.stderr.splitlines() if line.strip()]
        t.ok(p.returncode == 2 and len(lines) == 1 and flag in lines[0], "%s=%r refused in one line" % (flag, value),
             p.stderr)


def main():
    t = Tap()
    t.run(test_flags)
    with tempfile.TemporaryDirectory() as tmp, mc_env(tmp) as env:
        t.run(test_lifecycle_drain, env)
        t.run(test_node_metadata, env)
        t.run(test_metrics, env)
        t.run(test_skip_eviction, env)
        t.run(test_references, env)
        t.run(test_unsupported_os, env)
        t.run(test_openstack, env)
        t.run(test_machineset, env)
        t.run(test_deployment_min_ready_history, env)
        t.run(test_example_hetzner, env)
        t.run(test_example_openstack, env)
        t.run(test_kill, env)
        t.run(test_kill_openstack, env)
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
