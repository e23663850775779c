#!/usr/bin/env python3
"""Tenant isolation of Cluster API machines, once per provider with a machine lifecycle (Hetzner,
OpenStack): a CloudnodeMachine created with a spec.providerID that names the server of another,
live CloudnodeMachine must not take that server over. The controller refuses the relabel with a
terminal failure on the newcomer; the server keeps its owner's UID, the owner stays ready, and
deleting the newcomer leaves the server in place.

A legitimate move (the old object gone, see test-controller-machines-move.py) still relabels.

A tenant's credentials Secret that names its own OpenStack auth-url (a listener of the test on
loopback) with its own user and password must not make the controller complete it with the
controller's own credentials from the environment (OS_APPLICATION_CREDENTIAL_*): what reaches the
tenant's Keystone is the Secret's content only.

A credentials Secret rotated under machines that keep being created must not leave every
replaced provider in memory: once the machines are at rest the controller holds its own provider
and the current one (metric cloudnode_cloud_providers), and one Secret in its cache."""
import base64
import http.server
import json
import os
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from cntap import Tap  # noqa: E402
from capimachines import machine_env, wait_for  # noqa: E402
from cncapi import SECRETS, Controller  # noqa: E402
from fakecloud import HETZNER_TOKEN  # noqa: E402

CONTROLLER_APPCRED = {"OS_APPLICATION_CREDENTIAL_ID": "controller-appcred-id",
                      "OS_APPLICATION_CREDENTIAL_SECRET": "controller-appcred-secret-5f1e"}
TENANT_PASSWORD = "tenant-password-77c2"


def failure(env, name):
    o = env.get(name)
    return ((o or {}).get("status") or {}).get("failureReason")


def test_provider_id_takeover(t, env):
    ctl = env.controller()
    try:
        owner = env.machine("owner")
        t.ok(wait_for(lambda: env.ready("owner"), 40), "%s: the owner machine is ready" % env.provider,
             ctl.output()[-2000:])
        uid = owner["metadata"]["uid"]
        servers = env.servers(uid)
        t.eq(len(servers), 1, "%s: one server carries the owner's UID" % env.provider)
        pid = env.get("owner")["spec"]["providerID"]
        mark = len(env.c.requests())
        thief = env.machine("thief", extra_spec={"providerID": pid})
        tuid = thief["metadata"]["uid"]
        t.ok(wait_for(lambda: failure(env, "thief") or env.servers(tuid), 20),
             "%s: the newcomer naming the owner's server is decided" % env.provider, ctl.output()[-3000:])
        t.eq([s["id"] for s in env.servers(uid)], [s["id"] for s in servers],
             "%s: the server still carries the owner's UID" % env.provider)
        t.eq(env.servers(tuid), [], "%s: and not the newcomer's" % env.provider)
        t.eq(failure(env, "thief"), "InstanceOwnedElsewhere",
             "%s: the newcomer failed with a terminal reason" % env.provider)
        t.eq([r for r in env.c.requests()[mark:] if env.is_create(r)], [],
             "%s: no server created for the newcomer" % env.provider)
        env.delete("thief")
        t.ok(wait_for(lambda: env.gone("thief"), 30), "%s: the newcomer can be deleted" % env.provider,
             ctl.output()[-3000:])
        t.eq([s["id"] for s in env.servers(uid)], [s["id"] for s in servers],
             "%s: deleting it left the owner's server in place" % env.provider)
        t.ok(env.ready("owner"), "%s: the owner is still ready" % env.provider)
        env.delete("owner")
        t.ok(wait_for(lambda: env.gone("owner"), 40), "%s: the owner is deleted" % env.provider)
        t.eq(env.servers(uid), [], "%s: with its server" % env.provider)
    finally:
        ctl.stop()


class Keystone(http.server.BaseHTTPRequestHandler):
    """The tenant's auth-url: records what it is sent, refuses every token request."""
    bodies = []

    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        Keystone.bodies.append(self.rfile.read(n).decode("utf-8", "replace"))
        self.send_response(401)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(json.dumps({"error": {"code": 401, "title": "Unauthorized"}}).encode())

    def log_message(self, *args):
        pass


def test_secret_not_completed_from_environment(t, env):
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Keystone)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    data = {"auth-url": "http://127.0.0.1:%d/v3" % srv.server_address[1], "username": "tenant",
            "password": TENANT_PASSWORD, "user-domain-name": "Default", "project-name": "tenant"}
    env.k.api("POST", SECRETS, {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "tenant-creds"},
                                "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}})
    saved = {k: os.environ.get(k) for k in CONTROLLER_APPCRED}
    os.environ.update(CONTROLLER_APPCRED)
    try:
        ctl = Controller(env.k, env.tmp, ["--machine-provider", "openstack", "--machine-cloud-config", env.conf])
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    try:
        env.machine("tenant", extra_spec={"credentials": {"secretRef": {"name": "tenant-creds"}}})
        t.ok(wait_for(lambda: Keystone.bodies, 30), "the tenant's Keystone was asked for a token",
             ctl.output()[-2000:])
        sent = "".join(Keystone.bodies)
        t.ok(TENANT_PASSWORD in sent, "with the Secret's password")
        leaked = [v for v in CONTROLLER_APPCRED.values() if v in sent]
        t.eq(leaked, [], "and nothing of the controller's own credentials")
    finally:
        ctl.stop()
        srv.shutdown()
        srv.server_close()


def gauge(ctl, name):
    for line in ctl.metrics().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


def test_rotated_providers_freed(t, env):
    ctl = env.controller()
    try:
        for i in range(4):
            body = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "rotating"},
                    "data": {k: base64.b64encode(v.encode()).decode() for k, v in
                             {"token": HETZNER_TOKEN, "endpoint": env.c.url + "/v1", "rotation": str(i)}.items()}}
            code, _ = env.k.api("PUT", SECRETS + "/rotating", body)
            if code == 404:
                code, _ = env.k.api("POST", SECRETS, body)
            # A create reads a Secret older than CN_CREDENTIALS_FRESH (5 s) again: a new provider.
            time.sleep(5.5)
            env.machine("rot%d" % i, extra_spec={"credentials": {"secretRef": {"name": "rotating"}}})
            t.ok(wait_for(lambda: env.ready("rot%d" % i), 40), "rotation %d: the machine is ready" % i,
                 ctl.output()[-2000:])
        builds = ctl.output().count("Credentials Secret default/rotating (resourceVersion")
        t.ok(builds >= 4, "a provider was built for each rotation (%d)" % builds)
        t.ok(wait_for(lambda: gauge(ctl, "cloudnode_cloud_providers") == 2, 20),
             "at rest: the controller's provider and the current one are all that is left",
             "cloudnode_cloud_providers %s" % gauge(ctl, "cloudnode_cloud_providers"))
        t.eq(gauge(ctl, "cloudnode_credentials_secrets"), 1.0, "one Secret in the cache")
        for i in range(4):
            env.delete("rot%d" % i)
        t.ok(wait_for(lambda: all(env.gone("rot%d" % i) for i in range(4)), 40), "and the machines are deleted")
    finally:
        ctl.stop()


def main():
    t = Tap()
    for provider in ("hetzner", "openstack"):
        with tempfile.TemporaryDirectory() as tmp, machine_env(tmp, provider, 0.3, 0.2) as env:
            t.run(test_provider_id_takeover, env)
            if provider == "hetzner":
                t.run(test_rotated_providers_freed, env)
            if provider == "openstack":
                t.run(test_secret_not_completed_from_environment, env)
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
