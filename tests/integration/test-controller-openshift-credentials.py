#!/usr/bin/env python3
"""On OpenShift the cluster-mode initializer's credentials come through the Cloud Credential
Operator: the release manifests' CredentialsRequests (one per cloud, all valid against the real
CRD) name the Secret cloud-credentials of the operand namespace; while it does not exist the
ClusterOperator is Degraded with reason CredentialsSecretMissing, and once the operator (played
here) fulfils the request for the cluster's platform it is not. The credential appears in no
ConfigMap, Event, log line or metric of the controller."""
import base64
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "pylib"))
import openshift  # noqa: E402
from cntap import Tap, sibling_test, src, wait_for  # noqa: E402

import yaml  # noqa: E402

apply = sibling_test("test-controller-apply.py")
CCO_NS = "openshift-cloud-credential-operator"
RELEASE = src("manifests", "openshift",
              "0000_26_cloud-controller-manager-operator_13_cloudnode-credentialsrequests.yaml")
PASSWORD = "cco-minted-password-5e1f"
SECRETS = "/api/v1/namespaces/%s/secrets" % apply.NS


def degraded(k):
    co = apply.get(k, openshift.CO + "/cloudnode") or {}
    for c in (co.get("status") or {}).get("conditions") or []:
        if c["type"] == "Degraded":
            return c
    return None


def main():
    t = Tap()
    with tempfile.TemporaryDirectory() as tmp:
        with openshift.Cluster(tmp, "OpenStack", credentials=False) as k:
            openshift.create_namespaces(k, CCO_NS)
            with open(RELEASE) as f:
                requests = [d for d in yaml.safe_load_all(f) if d]
            kinds = {}
            for r in requests:
                code, body = k.api("POST", "/apis/cloudcredential.openshift.io/v1/namespaces/%s/credentialsrequests"
                                   % CCO_NS, r)
                t.eq(code, 201, "CredentialsRequest %s is valid against the real CRD" % r["metadata"]["name"])
                kinds[r["metadata"]["name"]] = r["spec"]["providerSpec"]["kind"]
            t.eq(kinds, {"cloudnode-aws": "AWSProviderSpec", "cloudnode-gcp": "GCPProviderSpec",
                         "cloudnode-azure": "AzureProviderSpec", "cloudnode-openstack": "OpenStackProviderSpec",
                         "cloudnode-hetzner": "HetznerProviderSpec",
                         "cloudnode-digitalocean": "DigitalOceanProviderSpec",
                         "cloudnode-proxmox": "ProxmoxProviderSpec"},
                 "one request per cluster-mode cloud, with the operator's provider spec where it has one")
            t.eq({(r["spec"]["secretRef"]["namespace"], r["spec"]["secretRef"]["name"]) for r in requests},
                 {("openshift-cloudnode", "cloud-credentials")}, "all write the operand namespace's cloud-credentials")

            apply.setup_cluster(k)
            with openshift.controller(t, k, tmp, cloud_provider=None) as c:
                d = wait_for(lambda: apply.roll_out(k) or (lambda x: x if x and x["status"] == "True" else None)(
                    degraded(k)), 60)
                t.ok(d and d.get("reason") == "CredentialsSecretMissing" and "cloud-credentials" in d["message"],
                     "without the Secret: Degraded, reason CredentialsSecretMissing, naming the Secret",
                     d or c.output()[-2000:])
                t.ok(apply.get(k, apply.DEPLOY), "the operand is applied all the same")

                # The Cloud Credential Operator fulfils the OpenStack request: a clouds.yaml.
                clouds = yaml.safe_dump({"clouds": {"openstack": {
                    "auth": {"auth_url": "https://keystone.example.test:5000/v3", "username": "cloudnode",
                             "password": PASSWORD, "project_name": "demo", "user_domain_name": "Default"},
                    "region_name": "RegionOne"}}})
                code, _ = k.api("POST", SECRETS, {"apiVersion": "v1", "kind": "Secret",
                                                  "metadata": {"name": "cloud-credentials"},
                                                  "data": {"clouds.yaml": base64.b64encode(clouds.encode()).decode()}})
                t.eq(code, 201, "the Secret is created")
                t.ok(wait_for(lambda: (lambda x: x and x["status"] == "False")(degraded(k)), 30),
                     "and Degraded clears", degraded(k))

                k.api("DELETE", SECRETS + "/cloud-credentials")
                t.ok(wait_for(lambda: (lambda x: x and x.get("reason") == "CredentialsSecretMissing")(degraded(k)), 30),
                     "a deleted Secret is Degraded again")

                configmaps = apply.get(k, "/api/v1/configmaps") or {}
                events = apply.get(k, "/api/v1/events") or {}
                status, metrics = c.get("/metrics")
                t.eq(status, 200, "metrics are served")
                for where, text in (("ConfigMap", json.dumps(configmaps)), ("Event", json.dumps(events)),
                                    ("ClusterOperator", json.dumps(apply.get(k, openshift.CO + "/cloudnode"))),
                                    ("log", c.output()), ("metric", metrics)):
                    t.ok(PASSWORD not in text and base64.b64encode(PASSWORD.encode()).decode() not in text,
                         "the credential is in no %s" % where)
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
