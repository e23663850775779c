#!/usr/bin/env python3
"""Cloud credentials of the cluster-mode initializer. The cloud config comes from a ConfigMap,
which the built-in view role can read, so the credential has a Secret of its own: the initializer
Deployment the controller applies mounts the optional Secret cloud-credentials of its namespace
as files and names the directory with --cloud-credentials-dir; no credential is in its
environment. A source
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
CREDENTIAL_ENV = {"HCLOUD_TOKEN", "OS_PASSWORD", "OS_APPLICATION_CREDENTIAL_SECRET", "AWS_SECRET_ACCESS_KEY",
                  "AZURE_CLIENT_SECRET", "DO_ACCESS_TOKEN"}
MERGE = "application/merge-patch+json"


def warnings(k):
    items = (apply.get(k, "/api/v1/namespaces/default/events") or {}).get("items", [])
    return [e for e in items if e.get("reason") == "CredentialsInConfigMap"]


def test_deployment_secret(t, k, c):
    t.ok(wait_for(lambda: apply.converged(k), 30), "the operand is applied", c.output()[-2000:])
    dep = apply.get(k, apply.DEPLOY) or {}
    ct = apply.container(dep) if dep else {}
    t.eq(sorted(CREDENTIAL_ENV & {e["name"] for e in ct.get("env") or []}), [], "no credential in the environment")
    volumes = {v["name"]: v for v in (dep.get("spec", {}).get("template", {}).get("spec", {}).get("volumes") or [])}
    mounts = {m["name"]: m for m in ct.get("volumeMounts") or []}
    secret = (volumes.get("cloud-credentials") or {}).get("secret") or {}
    t.eq((secret.get("secretName"), secret.get("optional")), ("cloud-credentials", True),
         "the optional Secret cloud-credentials is a volume")
    mount = mounts.get("cloud-credentials") or {}
    t.eq((mount.get("readOnly"), "--cloud-credentials-dir=" + str(mount.get("mountPath")) in ct.get("args", [])),
         (True, True), "mounted read-only where --cloud-credentials-dir points")
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
                t.run(test_deployment_secret, k, c)
                t.run(test_credentials_in_configmap, k, c)
            finally:
                c.stop()
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
