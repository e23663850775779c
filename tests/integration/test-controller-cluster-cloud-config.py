#!/usr/bin/env python3
"""cloudnode-controller publishes each provisioned CloudnodeCluster's cloud config for its
workload cluster as the Secret <cluster>-cloudnode-cloud-config (a ClusterResourceSet's Secret:
the Namespace cloudnode and the ConfigMap cloud-provider-config the workload cluster's controller
reads), against the fake API server with the controller's RBAC and the fake cloud: refused
without the namespace's RoleBinding to cloudnode:controller:capi-cloud-config (the condition names
it), then published with no credential, not written again while nothing changes (nor after a
restart), patched when the cloud config changes, a Secret of that name owned by someone else left
untouched, a Cluster name that makes no Secret name refused, the Secret gone with its CloudnodeCluster; OpenStack's and
Proxmox VE's likewise without their password or token."""
import base64
import os
import sys
import tempfile
import time

import yaml

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from cntap import Tap  # noqa: E402

from capimachines import Controller, machine_env  # noqa: E402
from cncapi import CNC, NS, SECRETS, condition, make_cnc, provisioned, wait_for  # noqa: E402
from fakecloud import HETZNER_TOKEN, OPENSTACK_USER, PVE_TOKEN  # noqa: E402

ROLE = "cloudnode:controller:capi-cloud-config"


def bind(env):
    code, body = env.k.api("POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/%s/rolebindings" % NS, {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "cloudnode-controller-cloud-config"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": ROLE},
        "subjects": [{"kind": "ServiceAccount", "name": "cloudnode-controller", "namespace": "cloudnode"}]})
    assert code in (201, 409), (code, body)


def secret(env, cluster):
    code, o = env.k.api("GET", SECRETS + "/" + cluster + "-cloudnode-cloud-config")
    return o if code == 200 else None


def documents(s):
    """The manifests a ClusterResourceSet applies, as YAML reads them."""
    text = base64.b64decode(s["data"]["cloud-provider-config.yaml"]).decode()
    return list(yaml.safe_load_all(text)), text


def published(env, name):
    o = env.obj(CNC, name)
    return o if condition(o, "CloudConfigPublished", "status") == "True" else None


def test_hetzner(t, env):
    c = env.cluster("w1")
    ctl = Controller(env.k, env.tmp, env.conf)
    try:
        make_cnc(env, "c1-infra", owner=c, spec={"provider": "hetzner",
                                                 "controlPlaneEndpoint": {"host": "api.c1.example", "port": 6443}})
        o = wait_for(lambda: condition(env.obj(CNC, "c1-infra"), "CloudConfigPublished") == "Forbidden" and
                     env.obj(CNC, "c1-infra"), 30)
        t.ok(o, "without the RoleBinding: CloudConfigPublished=False, reason Forbidden", ctl.output()[-2000:])
        msg = condition(o, "CloudConfigPublished", "message") or ""
        t.ok(ROLE in msg and NS in msg, "the message names the ClusterRole to bind and the namespace", msg)
        t.ok(provisioned(env, "c1-infra") is not None, "the cluster is provisioned all the same")
        t.eq(secret(env, "w1"), None, "no Secret")
    finally:
        ctl.stop()

    bind(env)
    ctl = Controller(env.k, env.tmp, env.conf)
    try:
        o = wait_for(lambda: published(env, "c1-infra"), 30)
        t.ok(o, "with it (a restarted controller): CloudConfigPublished=True", ctl.output()[-2000:])
        s = secret(env, "w1") or {}
        t.eq(s.get("type"), "addons.cluster.x-k8s.io/resource-set", "the Secret is a ClusterResourceSet's")
        t.eq((s.get("metadata") or {}).get("labels", {}).get("cluster.x-k8s.io/cluster-name"), "w1",
             "labelled with the Cluster's name")
        refs = (s.get("metadata") or {}).get("ownerReferences") or []
        t.eq([(r.get("kind"), r.get("name"), r.get("uid"), r.get("controller")) for r in refs],
             [("CloudnodeCluster", "c1-infra", (o or {}).get("metadata", {}).get("uid"), True)],
             "owned by the CloudnodeCluster (its UID)")
        docs, text = documents(s) if s else ([], "")
        t.eq([(d.get("kind"), d["metadata"].get("namespace"), d["metadata"]["name"]) for d in docs],
             [("Namespace", None, "cloudnode"), ("ConfigMap", "cloudnode", "cloud-provider-config")],
             "the Namespace and the ConfigMap the workload cluster's controller reads")
        conf = docs[1].get("data", {}).get("config", "") if len(docs) == 2 else ""
        t.ok("[Global]" in conf and ("endpoint = %s/v1" % env.c.url) in conf,
             "its config is a cloud.conf with the cloud's endpoint", conf)
        t.ok(HETZNER_TOKEN not in text and "token" not in conf, "no token in it", conf)
        rv = s.get("metadata", {}).get("resourceVersion")
        crv = (o or {}).get("metadata", {}).get("resourceVersion")
        time.sleep(2)
        t.eq(((secret(env, "w1") or {}).get("metadata") or {}).get("resourceVersion"), rv,
             "not written again while nothing changes")
        t.eq((env.obj(CNC, "c1-infra") or {}).get("metadata", {}).get("resourceVersion"), crv,
             "nor the CloudnodeCluster")
    finally:
        ctl.stop()

    ctl = Controller(env.k, env.tmp, env.conf)
    try:
        t.ok(wait_for(lambda: "CloudnodeCluster default/c1-infra: provision" in ctl.output(), 30),
             "a restarted controller passes over the cluster", ctl.output()[-2000:])
        time.sleep(1.5)
        t.eq(((secret(env, "w1") or {}).get("metadata") or {}).get("resourceVersion"), rv,
             "and finds the Secret as it should be: no write")
    finally:
        ctl.stop()

    # The cloud's endpoint changes (the controller's cloud config names it by another host).
    conf = os.path.join(env.tmp, "hetzner-localhost.conf")
    with open(conf, "w") as f:
        f.write("[Global]\ntoken = %s\nendpoint = %s/v1\n" % (HETZNER_TOKEN, env.c.url.replace("127.0.0.1", "localhost")))
    os.chmod(conf, 0o600)
    ctl = Controller(env.k, env.tmp, conf)
    try:
        def patched():
            s = secret(env, "w1")
            return s and "endpoint = http://localhost:" in documents(s)[1]
        t.ok(wait_for(patched, 30), "a changed endpoint: the Secret is patched", ctl.output()[-2000:])
        t.eq(condition(env.obj(CNC, "c1-infra"), "CloudConfigPublished", "status"), "True", "still published")

        # Someone else's Secret of the name the second cluster's would have.
        code, foreign = env.k.api("POST", SECRETS, {"apiVersion": "v1", "kind": "Secret",
                                                   "metadata": {"name": "w2-cloudnode-cloud-config"},
                                                   "data": {"mine": base64.b64encode(b"keep me").decode()}})
        t.eq(code, 201, "a user's Secret w2-cloudnode-cloud-config")
        c2 = env.cluster("w2")
        make_cnc(env, "c2", owner=c2, spec={"provider": "hetzner",
                                            "controlPlaneEndpoint": {"host": "api.c2.example", "port": 6443}})
        o = wait_for(lambda: condition(env.obj(CNC, "c2"), "CloudConfigPublished") == "NameTaken" and
                     env.obj(CNC, "c2"), 30)
        t.ok(o, "a Secret of that name not owned by the cluster: CloudConfigPublished=False, NameTaken",
             ctl.output()[-2000:])
        s2 = secret(env, "w2") or {}
        t.eq((s2.get("data"), s2.get("metadata", {}).get("resourceVersion"), s2.get("type")),
             (foreign["data"], foreign["metadata"]["resourceVersion"], foreign.get("type")),
             "and it is left exactly as it was")

        # A Cluster whose name makes no Secret name of ours (over 63 characters: no label value).
        long_name = "w3-" + "x" * 61
        c3 = env.cluster(long_name)
        make_cnc(env, "c3", owner=c3, spec={"provider": "hetzner",
                                            "controlPlaneEndpoint": {"host": "api.c3.example", "port": 6443}})
        o = wait_for(lambda: condition(env.obj(CNC, "c3"), "CloudConfigPublished") == "InvalidConfiguration" and
                     env.obj(CNC, "c3"), 30)
        t.ok(o, "a Cluster name over 63 characters: CloudConfigPublished=False, InvalidConfiguration",
             ctl.output()[-2000:])
        t.eq(secret(env, long_name), None, "and no Secret")

        # Deleted with its CloudnodeCluster (its ownerReference, by the garbage collector).
        env.k.api("DELETE", CNC + "/c1-infra")
        t.ok(wait_for(lambda: env.obj(CNC, "c1-infra") is None, 30), "the CloudnodeCluster is deleted")
        t.ok(wait_for(lambda: secret(env, "w1") is None, 30), "its Secret goes with it")
        t.ok(HETZNER_TOKEN not in ctl.output(), "the token is never logged")
    finally:
        ctl.stop()


def test_other(t, env, provider, secret_text, want):
    bind(env)
    c = env.cluster("w1")
    ctl = Controller(env.k, env.tmp, env.conf, provider=provider)
    try:
        make_cnc(env, "c1", owner=c, spec={"provider": provider,
                                           "controlPlaneEndpoint": {"host": "api.c1.example", "port": 6443}})
        o = wait_for(lambda: published(env, "c1"), 60)
        t.ok(o, "%s: CloudConfigPublished=True" % provider, ctl.output()[-2000:])
        s = secret(env, "w1")
        docs, text = documents(s) if s else ([{}, {}], "")
        conf = docs[1].get("data", {}).get("config", "") if len(docs) == 2 else ""
        t.ok(all(w in conf for w in want), "%s: where the cloud is (%s)" % (provider, ", ".join(want)), conf)
        t.ok(secret_text not in text and secret_text not in ctl.output(),
             "%s: never its credential, in the Secret or the log" % provider)
    finally:
        ctl.stop()


def main():
    t = Tap()
    with tempfile.TemporaryDirectory() as tmp:
        with machine_env(os.path.join(tmp, "hetzner")) as env:
            t.run(test_hetzner, env)
        with machine_env(os.path.join(tmp, "openstack"), provider="openstack") as env:
            t.run(test_other, env, "openstack", OPENSTACK_USER["password"], ["auth-url = ", "[Global]"])
        with machine_env(os.path.join(tmp, "proxmoxve"), provider="proxmoxve") as env:
            t.run(test_other, env, "proxmoxve", PVE_TOKEN["secret"], ["url = https://", "region = "])
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
