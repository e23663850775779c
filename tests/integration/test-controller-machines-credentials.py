#!/usr/bin/env python3
"""Cloud credentials from spec.credentials.secretRef: CloudnodeMachines and CloudnodeClusters
naming a Secret in their namespace use a provider built from it (a token key, a cloud.conf key,
or the key secretRef.key names), others the controller's --machine-cloud-config; a missing
Secret is a condition until it appears; a rotated Secret is used for the next create; a Secret
naming the controller's files is refused; the controller reads Secrets with GET only and never
logs their values."""
import base64
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from cntap import Tap  # noqa: E402

from cncapi import CNC, SECRETS, USER, Controller, condition, wait_for  # noqa: E402
from capimachines import machine_env  # noqa: E402
from fakecloud import OPENSTACK_USER  # noqa: E402

TOKEN_A = "tenant-a-token-0123456789"
TOKEN_B = "tenant-b-token-9876543210"


def put_secret(env, name, data):
    body = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name},
            "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}}
    code, _ = env.k.api("PUT", SECRETS + "/" + name, body)
    if code == 404:
        code, _ = env.k.api("POST", SECRETS, body)
    assert code in (200, 201), code


def ref(name, key=None):
    r = {"name": name}
    if key:
        r["key"] = key
    return {"credentials": {"secretRef": r}}


def failure(env, name):
    return ((env.get(name) or {}).get("status") or {}).get("failureReason")


def test_secret_credentials(t, env, ctl):
    put_secret(env, "creds-a", {"token": TOKEN_A + "\n", "endpoint": env.c.url + "/v1"})
    cnm = env.machine("sa1", extra_spec=ref("creds-a"))
    t.ok(wait_for(lambda: env.ready("sa1"), 40), "a machine with a token Secret gets ready", ctl.output()[-2000:])
    t.eq(len(env.servers(cnm["metadata"]["uid"])), 1, "with its server")

    env.machine("sd1")
    t.eq(wait_for(lambda: failure(env, "sd1"), 30), "Unauthorized",
         "a machine without secretRef uses the controller's cloud config (its token is not accepted here)")

    put_secret(env, "creds-conf", {"hcloud.conf": "[Global]\ntoken = %s\nendpoint = %s/v1\n" % (TOKEN_A, env.c.url)})
    env.machine("sk1", extra_spec=ref("creds-conf", "hcloud.conf"))
    t.ok(wait_for(lambda: env.ready("sk1"), 40), "secretRef.key names a cloud.conf")

    c = env.cluster("cc1")
    env.k.api("POST", CNC, {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "CloudnodeCluster",
                            "metadata": {"name": "cc1", "ownerReferences": [
                                {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "name": "cc1",
                                 "uid": c["metadata"]["uid"]}]},
                            "spec": dict({"provider": "hetzner"}, **ref("creds-a"))})
    t.ok(wait_for(lambda: (((env.obj(CNC, "cc1") or {}).get("status") or {}).get("initialization") or {})
                  .get("provisioned"), 30), "a CloudnodeCluster with a Secret is provisioned")


def test_missing_secret(t, env, ctl):
    env.machine("sm1", extra_spec=ref("creds-late"))
    t.eq(wait_for(lambda: condition(env.get("sm1"), "Ready"), 30), "CredentialsUnavailable",
         "a missing Secret is a condition")
    t.ok("creds-late" in (condition(env.get("sm1"), "Ready", "message") or ""), "that names the Secret")
    t.ok(not failure(env, "sm1"), "not a terminal failure")
    put_secret(env, "creds-late", {"token": TOKEN_A, "endpoint": env.c.url + "/v1"})
    t.ok(wait_for(lambda: env.ready("sm1"), 60), "ready once the Secret exists", ctl.output()[-1500:])


def test_refused_secret(t, env, ctl):
    put_secret(env, "creds-file", {"token": TOKEN_A, "endpoint": env.c.url + "/v1",
                                   "ca-file": "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"})
    cnm = env.machine("sf1", extra_spec=ref("creds-file"))
    t.eq(wait_for(lambda: condition(env.get("sf1"), "Ready"), 30), "CredentialsUnavailable",
         "a Secret naming the controller's files is refused")
    t.ok("ca-file" in (condition(env.get("sf1"), "Ready", "message") or ""), "the condition names the setting")
    t.eq(env.servers(cnm["metadata"]["uid"]), [], "and nothing is created")


def test_rotation(t, env, ctl):
    # A create reads its Secret anew when the last read is older than CN_CREDENTIALS_FRESH, so once
    # sa0 is ready the controller holds a read of creds-a a few seconds old. Rotated right then, the
    # next create first tries that read's (old) token: the refusal must make the controller read
    # the Secret again, not fail the machine.
    env.machine("sa0", extra_spec=ref("creds-a"))
    t.ok(wait_for(lambda: env.ready("sa0"), 40), "a create just before a rotation", ctl.output()[-2000:])
    # The cloud now accepts only the new token; the Secret is rotated to it.
    env.c.settings(hetzner_tokens=[TOKEN_B])
    put_secret(env, "creds-a", {"token": TOKEN_B, "endpoint": env.c.url + "/v1"})
    put_secret(env, "creds-late", {"token": TOKEN_B, "endpoint": env.c.url + "/v1"})
    env.machine("sa2", extra_spec=ref("creds-a"))
    t.ok(wait_for(lambda: env.ready("sa2"), 40), "a create after a rotation uses the new token",
         ctl.output()[-2000:])
    t.ok(not failure(env, "sa2"), "and no refusal of the old token failed it")
    for n in ("sa0", "sa1", "sa2", "sk1", "sm1"):
        env.delete(n)
    t.ok(wait_for(lambda: all(env.gone(n) for n in ("sa0", "sa1", "sa2", "sm1")), 60),
         "machines of the rotated Secret are deleted with the new token", ctl.output()[-2000:])


def test_wrong_secret_token(t, env, ctl):
    put_secret(env, "creds-wrong", {"token": TOKEN_A, "endpoint": env.c.url + "/v1"})
    env.machine("sw1", extra_spec=ref("creds-wrong"))
    got = wait_for(lambda: failure(env, "sw1"), 30)
    t.ok(got == "Unauthorized", "a Secret whose token the cloud refuses fails the machine",
         "got: %r\n%s" % (got, ctl.output()[-2000:]))
    reads = [a for a in env.k.audit() if a.get("user") == USER and a.get("resource") == "secrets"
             and a.get("name") == "creds-wrong"]
    t.ok(2 <= len(reads) <= 3, "after the Secret is read once more for the refusal, not over and over",
         [(a.get("verb"), a.get("name")) for a in reads])


def test_no_secret_leaks(t, env, ctl):
    out = ctl.output()
    t.ok(TOKEN_A not in out and TOKEN_B not in out, "no token in the controller's log")
    calls = [a for a in env.k.audit() if a.get("user") == USER and a.get("resource") == "secrets"]
    verbs = {a.get("verb") for a in calls}
    t.eq(verbs - {"create", "patch"}, {"get"}, "Secrets are only read with GET (no list, no watch)")
    # The one write it may try: the cloud config Secret it publishes for each CloudnodeCluster
    # (cluster-cloud-config.h; a create's audit record has no name, its path has none either).
    t.ok(all(a.get("verb") != "patch" or (a.get("name") or "").endswith("-cloudnode-cloud-config") for a in calls),
         "and changed only where it publishes a cluster's cloud config", sorted({a.get("name") for a in calls}))


def test_openstack(t, tmp):
    """OpenStack: the controller's own cloud config has a wrong password; a Secret of [Global]
    settings carries the right one."""
    with machine_env(os.path.join(tmp, "openstack"), provider="openstack") as env:
        bad = os.path.join(tmp, "openstack-bad.conf")
        with open(env.conf) as f, open(os.open(bad, os.O_WRONLY | os.O_CREAT, 0o600), "w") as out:
            out.write(f.read().replace(OPENSTACK_USER["password"], "wrong-password"))
        put_secret(env, "os-creds", {
            "auth-url": env.c.url + "/v3", "username": OPENSTACK_USER["name"],
            "password": OPENSTACK_USER["password"], "user-domain-name": OPENSTACK_USER["domain"],
            "project-name": OPENSTACK_USER["project"], "project-domain-name": OPENSTACK_USER["domain"],
            "region": "RegionOne"})
        ctl = Controller(env.k, env.tmp, ["--machine-provider", "openstack", "--machine-cloud-config", bad])
        try:
            env.machine("os1", extra_spec=ref("os-creds"))
            t.ok(wait_for(lambda: env.ready("os1"), 40), "OpenStack: a machine with a Secret gets ready",
                 ctl.output()[-2000:])
            env.machine("os2")
            t.eq(wait_for(lambda: failure(env, "os2"), 30), "Unauthorized",
                 "OpenStack: without it, the controller's (wrong) password is refused")
            c = env.cluster("osc")
            env.k.api("POST", CNC, {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2",
                                    "kind": "CloudnodeCluster",
                                    "metadata": {"name": "osc", "ownerReferences": [
                                        {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
                                         "name": "osc", "uid": c["metadata"]["uid"]}]},
                                    "spec": dict({"provider": "openstack"}, **ref("os-creds"))})
            t.ok(wait_for(lambda: (((env.obj(CNC, "osc") or {}).get("status") or {}).get("initialization") or {})
                          .get("provisioned"), 30), "OpenStack: a CloudnodeCluster with the Secret is provisioned")
            env.delete("os1")
            t.ok(wait_for(lambda: env.gone("os1"), 40), "OpenStack: deleted with the Secret's credentials")
            t.ok(OPENSTACK_USER["password"] not in ctl.output(), "OpenStack: the password is not logged")
        finally:
            ctl.stop()


def main():
    t = Tap()
    with tempfile.TemporaryDirectory() as tmp:
        with machine_env(os.path.join(tmp, "hetzner"), "hetzner", 0.3, 0.2) as env:
            env.c.settings(hetzner_tokens=[TOKEN_A])
            ctl = Controller(env.k, env.tmp, ["--machine-provider", "hetzner", "--machine-cloud-config", env.conf])
            try:
                t.run(test_secret_credentials, env, ctl)
                t.run(test_missing_secret, env, ctl)
                t.run(test_refused_secret, env, ctl)
                t.run(test_rotation, env, ctl)
                t.run(test_wrong_secret_token, env, ctl)
                t.run(test_no_secret_leaks, env, ctl)
            finally:
                ctl.stop()
        t.run(test_openstack, tmp)
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
