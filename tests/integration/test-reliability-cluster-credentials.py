#!/usr/bin/env python3
"""Cloud credentials of the cluster-mode initializer. The cloud config comes from a ConfigMap,
which the built-in view role can read, so the credential has a Secret of its own: the initializer
Deployment the controller applies takes HCLOUD_TOKEN, OS_PASSWORD and
OS_APPLICATION_CREDENTIAL_SECRET from the optional Secret cloud-credentials of its namespace
(secretKeyRef), which the providers read when the cloud config does not set them. A source
ConfigMap that does hold a credential is reported loudly: a Warning Event on the status object and
a warning in the log, both naming the setting, never its value. With the cloud config free of
credentials, no such warning."""
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "pylib"))
from cntap import Tap, sibling_test, src, wait_for  # noqa: E402
from fakekubeclient import FakeKube  # noqa: E402

apply = sibling_test("test-controller-apply.py")

TOKEN = "cm-token-4f0b7a"
ENV = {"HCLOUD_TOKEN": "token", "OS_PASSWORD": "password",
       "OS_APPLICATION_CREDENTIAL_SECRET": "application-credential-secret"}
MERGE = "application/merge-patch+json"


def warnings(k):
    items = (apply.get(k, "/api/v1/namespaces/default/events") or {}).get("items", [])
    return [e for e in items if e.get("reason") == "CredentialsInConfigMap"]


def test_deployment_env(t, k, c):
    t.ok(wait_for(lambda: apply.converged(k), 30), "the operand is applied", c.output()[-2000:])
    dep = apply.get(k, apply.DEPLOY) or {}
    env = {e["name"]: e for e in apply.container(dep).get("env") or []} if dep else {}
    for name, key in ENV.items():
        ref = ((env.get(name) or {}).get("valueFrom") or {}).get("secretKeyRef") or {}
        t.eq((ref.get("name"), ref.get("key"), ref.get("optional")), ("cloud-credentials", key, True),
             "%s from the optional Secret cloud-credentials, key %s" % (name, key))
    t.eq(warnings(k), [], "a cloud config without credentials raises no warning")


def test_credentials_in_configmap(t, k, c):
    code, _ = k.api("PATCH", apply.SOURCE, {"data": {"config": "[Global]\nregion = fsn1\ntoken = %s\n" % TOKEN}},
                    MERGE)
    assert code == 200, code
    found = wait_for(lambda: warnings(k), 30)
    t.ok(found, "a token in the source ConfigMap is reported with a Warning Event", c.output()[-2000:])
    msg = (found or [{}])[0].get("message", "")
    t.ok("token" in msg and "cloud-credentials" in msg, "that names the setting and the Secret to use", msg)
    t.ok(TOKEN not in msg and TOKEN not in c.output(), "and never the value")
    t.ok("CredentialsInConfigMap" in c.output() or "holds a credential" in c.output(), "and a warning in the log")


def main():
    t = Tap()
    with tempfile.TemporaryDirectory() as tmp:
        with FakeKube(os.path.join(tmp, "kube"), rbac=[src("manifests", "controller", "controller-rbac.yaml")],
                      load=[src("manifests", "controller", "controller-guard-policy.yaml")]) as k:
            apply.setup_cluster(k)
            c = apply.Controller(k, tmp)
            try:
                t.run(test_deployment_env, k, c)
                t.run(test_credentials_in_configmap, k, c)
            finally:
                c.stop()
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
