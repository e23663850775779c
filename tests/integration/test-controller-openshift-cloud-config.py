#!/usr/bin/env python3
"""On OpenShift the cloud config comes, as cluster-cloud-controller-manager-operator's config sync
takes it, from the ConfigMap the Infrastructure names (openshift-config, key spec.cloudConfig.key),
else from openshift-config-managed/kube-cloud-config (key cloud.conf), else from
--cloud-config-source: each source used while it is the first that exists, the cloud-conf
ConfigMap and the pod template's hash following every switch, and an Infrastructure key missing
from its ConfigMap a Degraded status that keeps the last good cloud.conf."""
import hashlib
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "pylib"))
import openshift  # noqa: E402
from cntap import Tap, sibling_test, wait_for  # noqa: E402
from cnproc import USER  # noqa: E402

apply = sibling_test("test-controller-apply.py")

OC_CM = "/api/v1/namespaces/openshift-config/configmaps"
MANAGED_CM = "/api/v1/namespaces/openshift-config-managed/configmaps"
ROLE = "/apis/rbac.authorization.k8s.io/v1/namespaces/openshift-config/roles/cloudnode:controller:cloud-config-reader"
FLAG_CONF = "[Global]\nregion = fsn1\n"  # apply.setup_cluster's cloudnode/cloud-provider-config


def co_condition(k, typ):
    co = apply.get(k, openshift.CO + "/cloudnode") or {}
    for c in (co.get("status") or {}).get("conditions") or []:
        if c["type"] == typ:
            return c
    return None


def synced(k, text):
    """cloud-conf holds text and the operand's pod template carries its hash."""
    cm, dep = apply.get(k, apply.CLOUD_CONF), apply.get(k, apply.DEPLOY)
    if not cm or not dep:
        return False
    want = hashlib.sha256(text.encode()).hexdigest()
    return (cm.get("data") or {}).get("cloud.conf") == text and \
        dep["spec"]["template"]["metadata"]["annotations"].get(apply.CONFIG_HASH) == want


def configmap(name, data):
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}


def main():
    t = Tap()
    with tempfile.TemporaryDirectory() as tmp:
        with openshift.Cluster(tmp, "OpenStack",
                               cloud_config={"name": "cloud-provider-config", "key": "config"}) as k:
            apply.setup_cluster(k)
            with openshift.controller(t, k, tmp, allowed_denials=(OC_CM,)) as c:
                t.ok(wait_for(lambda: synced(k, FLAG_CONF), 30),
                     "neither OpenShift source exists: cloud-conf is --cloud-config-source's", c.output()[-2000:])

                managed = "[Global]\nregion = managed\n"
                k.api("POST", MANAGED_CM, configmap("kube-cloud-config", {"cloud.conf": managed}))
                t.ok(wait_for(lambda: synced(k, managed), 30),
                     "openshift-config-managed/kube-cloud-config (key cloud.conf) wins over the flag's")

                infra = "[Global]\nregion = infra\n"
                k.api("POST", OC_CM, configmap("cloud-provider-config", {"config": infra, "other": "x"}))
                t.ok(wait_for(lambda: synced(k, infra), 30),
                     "the Infrastructure's openshift-config/cloud-provider-config (key config) wins over both")
                t.ok("from the Infrastructure cluster spec.cloudConfig" in c.output(),
                     "the log says which source is used")

                code, _ = k.api("PUT", OC_CM + "/cloud-provider-config",
                                configmap("cloud-provider-config", {"other": "[Global]\nregion = wrong\n"}))
                t.eq(code, 200, "the Infrastructure's ConfigMap loses its key")
                deg = wait_for(lambda: (lambda d: d if d and d["status"] == "True" else None)(
                    co_condition(k, "Degraded")), 30)
                t.ok(deg and "openshift-config/cloud-provider-config" in deg["message"] and
                     "'config'" in deg["message"],
                     "Degraded names the ConfigMap and the missing key", deg)
                t.ok(synced(k, infra), "and the last good cloud.conf stays in place")

                k.api("DELETE", OC_CM + "/cloud-provider-config")
                t.ok(wait_for(lambda: synced(k, managed), 30),
                     "without the Infrastructure's ConfigMap the managed one is used again")
                t.ok(wait_for(lambda: (lambda d: d and d["status"] == "False")(co_condition(k, "Degraded")), 30),
                     "and Degraded clears")

                k.api("PATCH", openshift.INFRA + "/cluster", {"spec": {"cloudConfig": {"name": "custom-cc",
                                                                                       "key": "cc.ini"}}},
                      "application/merge-patch+json")
                custom = "[Global]\nregion = custom\n"
                k.api("POST", OC_CM, configmap("custom-cc", {"cc.ini": custom}))
                deg = wait_for(lambda: (lambda d: d if d and d["status"] == "True" else None)(
                    co_condition(k, "Degraded")), 30)
                t.ok(deg and "openshift-config/custom-cc" in deg["message"] and
                     "cloudnode:controller:cloud-config-reader" in deg["message"],
                     "a ConfigMap the Role does not list: Degraded, naming it and the Role to extend", deg)
                t.ok(synced(k, managed), "and the last good cloud.conf stays in place")

                code, _ = k.api("PATCH", ROLE, [{"op": "add", "path": "/rules/0/resourceNames/-",
                                                 "value": "custom-cc"}], "application/json-patch+json")
                t.eq(code, 200, "the cluster admin adds it to the Role's resourceNames")
                t.ok(wait_for(lambda: synced(k, custom), 60),
                     "a ConfigMap the Infrastructure names later, with its own key, is followed")
                lists = [a for a in k.audit() if a.get("user") == USER and a.get("verb") in ("list", "watch") and
                         a.get("path") == OC_CM]
                t.ok(lists and all("fieldSelector=metadata.name" in (a.get("query") or "") for a in lists),
                     "openshift-config's ConfigMaps are only ever listed and watched by name",
                     [a.get("query") for a in lists if "fieldSelector=metadata.name" not in (a.get("query") or "")][:3])

                k.api("DELETE", OC_CM + "/custom-cc")
                k.api("DELETE", MANAGED_CM + "/kube-cloud-config")
                t.ok(wait_for(lambda: synced(k, FLAG_CONF), 30), "with neither, back to --cloud-config-source's")

    return t.done()


if __name__ == "__main__":
    sys.exit(main())
