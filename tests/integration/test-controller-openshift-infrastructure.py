#!/usr/bin/env python3
"""On OpenShift the operand follows the cluster's config.openshift.io objects, as
cluster-cloud-controller-manager-operator's do: the Infrastructure's platform is the cloud provider,
its infrastructureName the operand's OCP_INFRASTRUCTURE_NAME, a SingleReplica control-plane
topology one replica (whatever the Nodes say), and the cluster Proxy's status the operand's
HTTP_PROXY/HTTPS_PROXY/NO_PROXY, following every change."""
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "pylib"))
import openshift  # noqa: E402
from cntap import Tap, sibling_test, wait_for  # noqa: E402

apply = sibling_test("test-controller-apply.py")
PDB = "/apis/policy/v1/namespaces/%s/poddisruptionbudgets/cloudnode-cloud-controller-manager" % apply.NS
PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY")


def env(k):
    dep = apply.get(k, apply.DEPLOY)
    if not dep:
        return {}
    return {e["name"]: e.get("value") for e in apply.container(dep).get("env") or [] if "value" in e}


def proxy_env(k):
    e = env(k)
    return {n: e[n] for n in PROXY_VARS if n in e}


def main():
    t = Tap()
    with tempfile.TemporaryDirectory() as tmp:
        with openshift.Cluster(tmp, "OpenStack", topology="SingleReplica", name="mycluster-4h8zq") as k:
            apply.setup_cluster(k)  # three control-plane Nodes
            with openshift.controller(t, k, tmp, cloud_provider=None) as c:
                dep = wait_for(lambda: apply.get(k, apply.DEPLOY), 30)
                t.ok(dep, "the operand is applied", c.output()[-2000:])
                if not dep:
                    return t.done()
                t.eq(apply.provider_args(dep), ["--cloud-provider=openstack"], "the provider is the platform's")
                t.eq(env(k).get("OCP_INFRASTRUCTURE_NAME"), "mycluster-4h8zq",
                     "OCP_INFRASTRUCTURE_NAME is the Infrastructure's infrastructureName")
                t.eq(dep["spec"]["replicas"], 1, "SingleReplica topology: one replica despite three Nodes")
                t.eq(wait_for(lambda: apply.get(k, PDB), 30).get("spec", {}).get("minAvailable"), 0,
                     "and a PodDisruptionBudget that lets the node drain")
                t.eq(proxy_env(k), {}, "no Proxy object, no flag: no proxy environment")

                openshift.set_proxy(k, "http://proxy.example.test:3128", "http://proxy.example.test:3129",
                                    ".cluster.local,.svc,10.0.0.0/16,localhost")
                want = {"HTTP_PROXY": "http://proxy.example.test:3128", "HTTPS_PROXY": "http://proxy.example.test:3129",
                        "NO_PROXY": ".cluster.local,.svc,10.0.0.0/16,localhost"}
                t.eq(wait_for(lambda: proxy_env(k) == want and proxy_env(k), 30), want,
                     "the cluster Proxy's status becomes the operand's proxy environment")

                openshift.set_proxy(k, None, "http://other.example.test:8080", ".cluster.local")
                want = {"HTTPS_PROXY": "http://other.example.test:8080", "NO_PROXY": ".cluster.local"}
                t.eq(wait_for(lambda: proxy_env(k) == want and proxy_env(k), 30), want,
                     "a change follows, and a value the Proxy drops leaves the environment")

                openshift.set_proxy(k, None, None, None)
                t.eq(wait_for(lambda: proxy_env(k) == {} and {"ok": 1}, 30), {"ok": 1},
                     "a Proxy without values: no proxy environment")

                k.api("PATCH", openshift.INFRA + "/cluster/status", {"status": {
                    "controlPlaneTopology": "HighlyAvailable"}}, "application/merge-patch+json")
                t.ok(wait_for(lambda: (apply.get(k, apply.DEPLOY) or {}).get("spec", {}).get("replicas") == 2, 30),
                     "HighlyAvailable topology with three Nodes: two replicas")

    return t.done()


if __name__ == "__main__":
    sys.exit(main())
