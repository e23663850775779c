#!/usr/bin/env python3
"""The hooks of deckhouse/modules/030-cloud-provider-cloudnode, run through the shell-operator
protocol (tests/pylib/shelloperator.py) with binding contexts made from the fake API server:
Synchronization and Event for each binding, beforeHelm and onStartup; their values patches are
checked against openapi/values.yaml and their Kubernetes operations carried out on the server.
Broken or hostile inputs give one clear error and no patch."""
import base64
import copy
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
import yaml  # noqa: E402
import d8module  # noqa: E402
import shelloperator  # noqa: E402
from cntap import Tap, build, wait_for  # noqa: E402
from fakekubeclient import FakeKube  # noqa: E402

KEY = "cloudProviderCloudnode"
EXAMPLE = d8module.load("values.yaml")["x-examples"][0]["internal"]
NODEGROUP_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "nodegroups.deckhouse.io"},
    "spec": {"group": "deckhouse.io", "scope": "Cluster",
             "names": {"kind": "NodeGroup", "plural": "nodegroups", "singular": "nodegroup", "listKind": "NodeGroupList"},
             "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                 "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]}}


def hook(k, name):
    return shelloperator.Hook(os.path.join(d8module.MODULE, "hooks", name), k,
                              env={"CLOUDNODE_CONTROLLER": build("controller", "cloudnode-controller")})


def secret(name, data):
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": "kube-system"},
            "type": "Opaque", "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}}


def put(k, obj):
    path = shelloperator.collection(obj["apiVersion"], obj["kind"], obj["metadata"].get("namespace"))
    st, r = k.api("POST", path, obj)
    if st == 409:
        st, cur = k.api("GET", path + "/" + obj["metadata"]["name"])
        obj = dict(obj, metadata=dict(obj["metadata"], resourceVersion=cur["metadata"]["resourceVersion"]))
        st, r = k.api("PUT", path + "/" + obj["metadata"]["name"], obj)
    assert st in (200, 201), (st, r)
    return r


def delete(k, obj):
    path = shelloperator.collection(obj["apiVersion"], obj["kind"], obj["metadata"].get("namespace"))
    st, r = k.api("DELETE", path + "/" + obj["metadata"]["name"])
    assert st in (200, 202), (st, r)


def values_with(internal=None):
    return {KEY: {"internal": copy.deepcopy(internal or {})}, "global": {}}


def check_values(t, what, values):
    t.eq(d8module.errors("values.yaml", values[KEY]), [], "%s: the values after the patch are valid" % what)


def run_onstartup(t, k, name):
    """Runs hook name on start-up: its Kubernetes operations, checked to be CreateOrUpdate of CRDs
    and carried out on the server."""
    h = hook(k, name)
    t.eq(h.config, {"configVersion": "v1", "onStartup": 5}, "%s runs on start-up" % name)
    rc, _, vp, ops = h.run([{"binding": "onStartup"}])
    t.eq((rc, vp), (0, []), "%s succeeds without values changes" % name)
    t.ok(all(o["operation"] == "CreateOrUpdate" and o["object"]["kind"] == "CustomResourceDefinition"
             for o in ops or []), "%s: CreateOrUpdate operations of CRDs" % name)
    h.apply_kubernetes(ops)
    return ops or []


def test_ensure_crds(t, k):
    ops = run_onstartup(t, k, "ensure_crds")
    t.eq(sorted(o["object"]["metadata"]["name"] for o in ops), ["cloudnodeinstanceclasses.deckhouse.io"],
         "ensure_crds creates or updates the CRDs of crds/ and nothing of crds/external")
    served = wait_for(lambda: k.api("GET", "/apis/deckhouse.io/v1/cloudnodeinstanceclasses")[0] == 200, timeout=10)
    t.ok(served, "the InstanceClass is served once the operations are carried out")
    # A module directory holding something that is not a CRD: one error, no operation.
    with tempfile.TemporaryDirectory() as d:
        os.makedirs(os.path.join(d, "crds"))
        with open(os.path.join(d, "crds", "a.yaml"), "w") as f:
            f.write("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
        with open(os.path.join(d, "ctx"), "w") as f:
            f.write('[{"binding":"onStartup"}]')
        r = subprocess.run([build("controller", "cloudnode-controller"), "deckhouse-hook", "ensure-crds", "--module-dir", d],
                           capture_output=True, text=True, env=dict(os.environ, BINDING_CONTEXT_PATH=os.path.join(d, "ctx")))
        t.ok(r.returncode != 0 and "is not a CustomResourceDefinition" in r.stderr and len(r.stderr.splitlines()) == 1,
             "ensure_crds refuses a file that is not a CRD, in one line", r.stderr)


def test_ensure_external_crds(t, k):
    """crds/external holds the infrastructure provider's CRDs, which the module installs as
    Deckhouse's cloud-provider modules do (their ensure_external_crds hooks); the Cluster API core
    kinds are node-manager's, and the module installs none of them."""
    ops = run_onstartup(t, k, "ensure_external_crds")
    t.eq(sorted(o["object"]["metadata"]["name"] for o in ops),
         ["cloudnodeclusters.infrastructure.cluster.x-k8s.io", "cloudnodemachines.infrastructure.cluster.x-k8s.io",
          "cloudnodemachinetemplates.infrastructure.cluster.x-k8s.io"],
         "ensure_external_crds creates or updates every CRD of crds/external")
    t.ok(not any(o["object"]["spec"]["group"] == "cluster.x-k8s.io" for o in ops),
         "ensure_external_crds installs no Cluster API core kind (node-manager's)")
    for plural in ("cloudnodeclusters", "cloudnodemachines", "cloudnodemachinetemplates"):
        path = "/apis/infrastructure.cluster.x-k8s.io/v1beta2/namespaces/d8-cloud-instance-manager/" + plural
        t.ok(wait_for(lambda: k.api("GET", path)[0] == 200, timeout=10),
             "%s are served once the operations are carried out" % plural)
    # A failure of the command is the hook's failure.
    r = subprocess.run([os.path.join(d8module.MODULE, "hooks", "ensure_external_crds")], capture_output=True,
                       env=dict(os.environ, CLOUDNODE_CONTROLLER="false"))
    t.ok(r.returncode != 0, "ensure_external_crds passes a failure on")
    with tempfile.TemporaryDirectory() as tmp:
        ctx = os.path.join(tmp, "context.json")
        with open(ctx, "w") as f:
            f.write('[{"binding": "onStartup"}]')
        r = subprocess.run([build("controller", "cloudnode-controller"), "deckhouse-hook", "ensure-crds"],
                           capture_output=True, text=True,
                           env=dict(os.environ, BINDING_CONTEXT_PATH=ctx,
                                    KUBERNETES_PATCH_PATH=os.path.join(tmp, "kube.json")))
    t.ok(r.returncode != 0 and "--module-dir or --crds-dir" in r.stderr,
         "ensure-crds without a directory: one clear error", r.stderr)


def test_cluster_configuration(t, k):
    h = hook(k, "cluster_configuration")
    t.eq(sorted(h.bindings), ["cluster_configuration", "provider_cluster_configuration"],
         "cluster_configuration watches both Secrets")
    pcc = EXAMPLE["providerClusterConfiguration"]
    cc = EXAMPLE["clusterConfiguration"]
    s1 = put(k, secret("d8-provider-cluster-configuration", {
        "cloud-provider-cluster-configuration.yaml": yaml.safe_dump(pcc),
        "cloud-provider-discovery-data.json": json.dumps(EXAMPLE["providerDiscoveryData"])}))
    s2 = put(k, secret("d8-cluster-configuration", {"cluster-configuration.yaml": yaml.safe_dump(cc)}))
    values = values_with()
    ctxs = [h.synchronization("provider_cluster_configuration"), h.synchronization("cluster_configuration")]
    rc, err, vp, ops = h.run(ctxs, values)
    t.eq(rc, 0, "Synchronization succeeds", )
    values = shelloperator.apply_values_patch(values, vp)
    t.eq(values[KEY]["internal"].get("providerClusterConfiguration"), pcc,
         "Synchronization stores providerClusterConfiguration")
    t.eq(values[KEY]["internal"].get("clusterConfiguration"), cc, "Synchronization stores clusterConfiguration")
    t.ok(pcc["provider"]["credentials"]["token"] not in err, "the credentials are not logged")
    rc, err, vp, ops = h.run(ctxs, values)
    t.eq((rc, vp), (0, []), "a second Synchronization with the same Secrets changes nothing")
    # Event Modified: three masters become one.
    pcc2 = copy.deepcopy(pcc)
    pcc2["masterNodeGroup"]["replicas"] = 1
    s1 = put(k, secret("d8-provider-cluster-configuration", {
        "cloud-provider-cluster-configuration.yaml": yaml.safe_dump(pcc2)}))
    rc, err, vp, ops = h.run([h.event("provider_cluster_configuration", "Modified", s1)], values)
    values = shelloperator.apply_values_patch(values, vp)
    t.eq((rc, values[KEY]["internal"]["providerClusterConfiguration"]["masterNodeGroup"]["replicas"]), (0, 1),
         "Event Modified stores the new configuration")
    check_values(t, "Event Modified", dict(values, **{KEY: dict(values[KEY], internal=dict(
        values[KEY]["internal"], providerDiscoveryData=EXAMPLE["providerDiscoveryData"], storageClasses=[]))}))
    rc, err, vp, ops = h.run([h.event("cluster_configuration", "Added", s2)], values)
    t.eq((rc, vp), (0, []), "Event Added of an unchanged cluster configuration changes nothing")
    # Hostile Secrets: the values stay as they were.
    for what, data, message in [
            ("bad base64", None, "is not base64"),
            ("an alias bomb", {"cloud-provider-cluster-configuration.yaml": "a: &a [x]\nb: [*a, *a]\n"}, "alias"),
            ("a list, not an object", {"cloud-provider-cluster-configuration.yaml": "- 1\n- 2\n"}, "is not an object"),
            ("broken YAML", {"cloud-provider-cluster-configuration.yaml": "token: [" + "s3cr3t" * 10}, "line")]:
        bad = secret("d8-provider-cluster-configuration", data or {})
        if data is None:
            bad["data"] = {"cloud-provider-cluster-configuration.yaml": "!!!not base64 s3cr3t!!!"}
        rc, err, vp, ops = h.run([h.event("provider_cluster_configuration", "Modified", bad)], values)
        t.ok(rc != 0 and vp is None and message in err and len(err.strip().splitlines()) == 1 and "s3cr3t" not in err,
             "a Secret with %s: one error, no patch, no secret in the message" % what, err)
    big = secret("d8-provider-cluster-configuration", {})
    big["data"] = {"cloud-provider-cluster-configuration.yaml": "QUFB" * (1024 * 1024 // 2)}
    rc, err, vp, ops = h.run([h.event("provider_cluster_configuration", "Modified", big)], values)
    t.ok(rc != 0 and vp is None and "larger than" in err, "an oversized Secret value: one error, no patch", err)
    for what, raw in [("not JSON", "{"), ("not a list", "{}"), ("an Event without watchEvent",
                                                                 '[{"binding":"cluster_configuration","type":"Event"}]'),
                      ("objects that are not a list", '[{"binding":"cluster_configuration","type":"Synchronization",'
                                                      '"objects":{}}]'),
                      ("oversized", "[" + " " * (17 * 1024 * 1024) + "]")]:
        rc, err, vp, ops = h.run(None, values, raw_contexts=raw)
        t.ok(rc != 0 and vp is None and ops is None and len(err.strip().splitlines()) == 1,
             "binding contexts %s: one error, no patch" % what, err)
    # Event Deleted: the value goes.
    delete(k, s1)
    rc, err, vp, ops = h.run([h.event("provider_cluster_configuration", "Deleted", s1)], values)
    t.eq((rc, vp), (0, [{"op": "remove", "path": "/%s/internal/providerClusterConfiguration" % KEY}]),
         "Event Deleted removes providerClusterConfiguration")


def test_discovery_data(t, k):
    h = hook(k, "discovery_data")
    dd = {"apiVersion": "deckhouse.io/v1", "kind": "CloudnodeCloudDiscoveryData", "zones": ["nova"],
          "volumeTypes": [{"name": "SSD"}, {"name": "network_hdd"}, {"name": "__fast__"}, {"name": "ssd"},
                          {"name": "excluded-1"}]}
    s = put(k, secret("d8-provider-cluster-configuration", {
        "cloud-provider-cluster-configuration.yaml": yaml.safe_dump(EXAMPLE["providerClusterConfiguration"]),
        "cloud-provider-discovery-data.json": json.dumps(dd)}))
    values = values_with(dict(EXAMPLE, providerDiscoveryData=None, storageClasses=None))
    del values[KEY]["internal"]["providerDiscoveryData"], values[KEY]["internal"]["storageClasses"]
    config = {KEY: {"storageClass": {"exclude": ["excluded-.*"]}}}
    rc, err, vp, ops = h.run([h.synchronization("provider_cluster_configuration")], values, config)
    values = shelloperator.apply_values_patch(values, vp)
    t.eq(rc, 0, "Synchronization succeeds")
    t.eq(values[KEY]["internal"].get("providerDiscoveryData"), dd, "Synchronization stores providerDiscoveryData")
    t.eq(values[KEY]["internal"].get("storageClasses"),
         [{"name": "ssd", "type": "SSD"}, {"name": "network-hdd", "type": "network_hdd"}, {"name": "fast", "type": "__fast__"}],
         "one StorageClass per volume type: DNS names, the first of equal names, excluded ones left out")
    check_values(t, "discovery Synchronization", values)
    dd2 = dict(dd, volumeTypes=[{"name": "hdd"}])
    s = put(k, secret("d8-provider-cluster-configuration", {"cloud-provider-discovery-data.json": json.dumps(dd2)}))
    rc, err, vp, ops = h.run([h.event("provider_cluster_configuration", "Modified", s)], values, config)
    values = shelloperator.apply_values_patch(values, vp)
    t.eq((rc, values[KEY]["internal"]["storageClasses"]), (0, [{"name": "hdd", "type": "hdd"}]),
         "Event Modified replaces the StorageClasses")
    rc, err, vp, ops = h.run([h.event("provider_cluster_configuration", "Modified", s)], values,
                             {KEY: {"storageClass": {"exclude": ["("]}}})
    t.ok(rc != 0 and vp is None and "not a regular expression" in err, "a broken exclude expression: one error, no patch",
         err)
    delete(k, s)
    rc, err, vp, ops = h.run([h.event("provider_cluster_configuration", "Deleted", s)], values, config)
    values = shelloperator.apply_values_patch(values, vp)
    t.ok(rc == 0 and "providerDiscoveryData" not in values[KEY]["internal"]
         and "storageClasses" not in values[KEY]["internal"], "Event Deleted removes the discovery data and classes")


def test_every_cloud(t, k):
    """The installer's Secret of each cloud (the x-examples of values.yaml: Hetzner, OpenStack,
    Proxmox VE, whose zones are the cluster's nodes) becomes the values as it is: valid, no
    credential in the log; the InstanceClass of each cloud's node groups is served and gets its
    NodeGroups registered."""
    cc_hook, dd_hook, ic_hook = hook(k, "cluster_configuration"), hook(k, "discovery_data"), hook(k, "instance_class")
    put(k, NODEGROUP_CRD)
    wait_for(lambda: k.api("GET", "/apis/deckhouse.io/v1/nodegroups")[0] == 200, timeout=10)
    for ex in d8module.load("values.yaml")["x-examples"]:
        internal = ex["internal"]
        pcc = internal["providerClusterConfiguration"]
        cloud = pcc["provider"]["name"]
        s = put(k, secret("d8-provider-cluster-configuration", {
            "cloud-provider-cluster-configuration.yaml": yaml.safe_dump(pcc),
            "cloud-provider-discovery-data.json": json.dumps(internal["providerDiscoveryData"])}))
        put(k, secret("d8-cluster-configuration", {
            "cluster-configuration.yaml": yaml.safe_dump(internal["clusterConfiguration"])}))
        values, log = values_with(), ""
        for what, h, bindings in (("cluster_configuration", cc_hook, ("provider_cluster_configuration",
                                                                      "cluster_configuration")),
                                  ("discovery_data", dd_hook, ("provider_cluster_configuration",))):
            rc, err, vp, ops = h.run([h.synchronization(b) for b in bindings], values)
            t.ok(rc == 0, "%s: %s Synchronization succeeds" % (cloud, what), err)
            values = shelloperator.apply_values_patch(values, vp or [])
            log += err
        got = values[KEY]["internal"]
        t.eq((got.get("providerClusterConfiguration"), got.get("providerDiscoveryData"),
              got.get("clusterConfiguration")),
             (pcc, internal["providerDiscoveryData"], internal["clusterConfiguration"]),
             "%s: the provider cluster configuration, discovery data (zones %s) and cluster configuration are "
             "stored as they are" % (cloud, internal["providerDiscoveryData"].get("zones")))
        check_values(t, cloud, values)
        secrets = [v for v in pcc["provider"]["credentials"].values() if len(v) > 8]
        t.ok(not any(v in log for v in secrets), "%s: the credentials are not logged" % cloud, log)
        delete(k, s)
        name = "every-cloud-" + cloud
        ic = {"apiVersion": "deckhouse.io/v1", "kind": "CloudnodeInstanceClass", "metadata": {"name": name},
              "spec": pcc["masterNodeGroup"]["instanceClass"]}
        st, r = k.api("POST", "/apis/deckhouse.io/v1/cloudnodeinstanceclasses", ic)
        t.ok(st == 201, "%s: an InstanceClass of the cloud is created" % cloud, r)
        ng = put(k, {"apiVersion": "deckhouse.io/v1", "kind": "NodeGroup", "metadata": {"name": name + "-ng"},
                     "spec": {"nodeType": "CloudEphemeral", "cloudInstances": {"classReference": {
                         "kind": "CloudnodeInstanceClass", "name": name}}}})
        rc, err, vp, ops = ic_hook.run([ic_hook.event("node_groups", "Added", ng)])
        t.eq([(o["name"], o["mergePatch"]) for o in ops or []],
             [(name, {"status": {"nodeGroupConsumers": [name + "-ng"]}})],
             "%s: its NodeGroup is registered in the InstanceClass's status" % cloud)
        ic_hook.apply_kubernetes(ops)
        delete(k, ng)
        delete(k, ic)


def test_instance_class(t, k):
    h = hook(k, "instance_class")
    put(k, NODEGROUP_CRD)
    wait_for(lambda: k.api("GET", "/apis/deckhouse.io/v1/nodegroups")[0] == 200, timeout=10)
    ic = {"apiVersion": "deckhouse.io/v1", "kind": "CloudnodeInstanceClass", "metadata": {"name": "worker"},
          "spec": {"hetzner": {"serverType": "cx22", "image": "debian-12", "location": "fsn1"}}}
    ic2 = dict(copy.deepcopy(ic), metadata={"name": "unused"})
    for o in (ic, ic2):
        put(k, o)

    def ng(name, cls):
        return {"apiVersion": "deckhouse.io/v1", "kind": "NodeGroup", "metadata": {"name": name},
                "spec": {"nodeType": "CloudEphemeral",
                         "cloudInstances": {"classReference": {"kind": "CloudnodeInstanceClass", "name": cls}}}}
    put(k, ng("b-workers", "worker"))
    put(k, ng("a-workers", "worker"))
    put(k, dict(ng("other", "worker"), spec={"cloudInstances": {"classReference": {"kind": "OpenStackInstanceClass",
                                                                                    "name": "worker"}}}))
    for b in ("instance_classes", "node_groups"):
        rc, err, vp, ops = h.run([h.synchronization(b)])
        t.eq((rc, ops), (0, [{"operation": "MergePatch", "apiVersion": "deckhouse.io/v1", "kind": "CloudnodeInstanceClass",
                              "name": "worker", "subresource": "status",
                              "mergePatch": {"status": {"nodeGroupConsumers": ["a-workers", "b-workers"]}}}]),
             "Synchronization of %s registers the NodeGroups of the class, and no others" % b)
    h.apply_kubernetes(ops)
    st, got = k.api("GET", "/apis/deckhouse.io/v1/cloudnodeinstanceclasses/worker")
    t.eq(got.get("status"), {"nodeGroupConsumers": ["a-workers", "b-workers"]}, "the status is on the server")
    rc, err, vp, ops = h.run([h.synchronization("node_groups")])
    t.eq((rc, ops), (0, None), "a second Synchronization changes nothing")
    new = put(k, ng("c-gpu", "unused"))
    rc, err, vp, ops = h.run([h.event("node_groups", "Added", new)])
    t.eq([(o["name"], o["mergePatch"]) for o in ops or []], [("unused", {"status": {"nodeGroupConsumers": ["c-gpu"]}})],
         "Event Added of a NodeGroup registers it with its class")
    h.apply_kubernetes(ops)
    # Event of an InstanceClass: a class that a NodeGroup already names.
    late = put(k, dict(copy.deepcopy(ic), metadata={"name": "late"}))
    put(k, ng("d-late", "late"))
    rc, err, vp, ops = h.run([h.event("instance_classes", "Added", late)])
    t.eq([(o["name"], o["mergePatch"]) for o in ops or []], [("late", {"status": {"nodeGroupConsumers": ["d-late"]}})],
         "Event Added of an InstanceClass registers the NodeGroups that already name it")
    h.apply_kubernetes(ops)
    delete(k, new)
    rc, err, vp, ops = h.run([h.event("node_groups", "Deleted", new)])
    t.eq([(o["name"], o["mergePatch"]) for o in ops or []], [("unused", {"status": {"nodeGroupConsumers": []}})],
         "Event Deleted of a NodeGroup unregisters it")


def node(name, tainted):
    n = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {
        "node-role.kubernetes.io/control-plane": ""}}, "spec": {}}
    if tainted:
        n["spec"]["taints"] = [{"key": "node.cloudprovider.kubernetes.io/uninitialized", "value": "true",
                                "effect": "NoSchedule"}]
    return n


def test_wait_for_masters(t, k):
    h = hook(k, "wait_for_masters")
    t.eq(h.config.get("beforeHelm"), 1, "wait_for_masters runs before the module's Helm run")
    for i in range(3):
        put(k, node("master-%d" % i, True))
    put(k, dict(node("worker-0", True), metadata={"name": "worker-0"}))
    for ctx in (h.synchronization("master_nodes"), h.event("master_nodes", "Modified", node("master-0", True))):
        rc, err, vp, ops = h.run([ctx])
        t.eq((rc, vp, ops), (0, [], None), "%s of master_nodes neither holds nor patches" % ctx["type"])
    rc, err, vp, ops = h.run([h.before_helm()])
    t.ok(rc != 0 and "3 of 3 control-plane Nodes" in err, "beforeHelm holds while every master is uninitialized", err)
    put(k, node("master-0", False))
    put(k, node("master-2", False))
    rc, err, vp, ops = h.run([h.before_helm()])
    t.ok(rc != 0 and "1 of 3 control-plane Nodes to be initialized: master-1" in err,
         "beforeHelm holds until the last master is initialized", err)
    put(k, node("master-1", False))
    rc, err, vp, ops = h.run([h.before_helm()])
    t.eq(rc, 0, "beforeHelm goes on once every master is initialized (a tainted worker does not count)")
    bad = node("master-9", False)
    bad["spec"]["taints"] = {"key": "node.cloudprovider.kubernetes.io/uninitialized"}
    rc, err, vp, ops = h.run([{"binding": "beforeHelm", "snapshots": {"master_nodes": [{"object": bad}]}}])
    t.ok(rc != 0 and "spec.taints is not a list" in err, "a Node whose taints are not a list: one clear error", err)
    rc, err, vp, ops = h.run([{"binding": "beforeHelm", "snapshots": {"master_nodes": []}}])
    t.ok(rc != 0 and "to be listed" in err, "beforeHelm holds while no master is known", err)


def test_command_line(t, k):
    ctl = build("controller", "cloudnode-controller")
    env = {k: v for k, v in os.environ.items() if not k.endswith("_PATH") or k == "PATH"}
    for args, code, message in [(["deckhouse-hook"], 2, "needs a hook name"),
                                (["deckhouse-hook", "nope"], 2, "Unknown Deckhouse hook 'nope'"),
                                (["deckhouse-hook", "discovery-data", "extra"], 2, "unexpected argument 'extra'"),
                                (["deckhouse-hook", "discovery-data"], 1, "BINDING_CONTEXT_PATH is not set")]:
        r = subprocess.run([ctl] + args, capture_output=True, text=True, env=env)
        t.ok(r.returncode == code and message in r.stderr and len(r.stderr.strip().splitlines()) == 1,
             "cloudnode-controller %s: exit %d, one line" % (" ".join(args), code), r.stderr)
    # Operations with nowhere to go: an error, and the other output file is left as it was.
    with tempfile.TemporaryDirectory() as d:
        ctx, out = os.path.join(d, "ctx"), os.path.join(d, "values-patch")
        for path, text in ((ctx, '[{"binding":"onStartup"}]'), (out, "untouched")):
            with open(path, "w") as f:
                f.write(text)
        r = subprocess.run([ctl, "deckhouse-hook", "ensure-crds", "--module-dir", d8module.MODULE], capture_output=True,
                           text=True, env=dict(env, BINDING_CONTEXT_PATH=ctx, VALUES_JSON_PATCH_PATH=out))
        with open(out) as f:
            kept = f.read()
        t.ok(r.returncode == 1 and "KUBERNETES_PATCH_PATH is not set, but the hook has 1 changes" in r.stderr
             and kept == "untouched", "changes without KUBERNETES_PATCH_PATH: one error, nothing written", r.stderr)


def main():
    t = Tap()
    try:
        import jsonschema  # noqa: F401
    except ImportError:
        t.skip_all("python3-jsonschema is not installed")
    with tempfile.TemporaryDirectory(prefix="cn-d8-hooks-") as d:
        with FakeKube(os.path.join(d, "kube")) as k:
            for fn in (test_ensure_crds, test_ensure_external_crds, test_cluster_configuration, test_discovery_data, test_every_cloud,
                       test_instance_class,
                       test_wait_for_masters, test_command_line):
                t.run(fn, k)
    sys.exit(t.done())


if __name__ == "__main__":
    main()
