#!/usr/bin/env python3
"""Secrets stay in their credential files. Runs, with known credentials and at the highest log
verbosity, cloudnode-initializer in cluster mode against the Hetzner API (bearer token) and
against OpenStack (Keystone password) with injected 401/500 answers on the authenticated requests
(error paths are where credentials leak), cloudnode-controller reconciling a Hetzner machine (500
answers only: it treats 401 as a terminal machine failure), and `cloudnode-controller render` with
an OpenStack password; then searches every log, every Event and object in the fake API server, the
/metrics output and every written file except the credential files for each secret (as is, base64
and URL-encoded): none may appear.

The credentials must really have been used: the test also asserts that the clouds and the API
server accepted them. CN_RELIABILITY_STATS=FILE appends the figures as one JSON line."""
import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reliability"))
from relutil import machines_helpers, record  # noqa: E402
from cntap import Tap, build, src  # noqa: E402
from cninit import (CLUSTER_SA, RBAC, BINARY as INITIALIZER, Initializer, free_port, hetzner_conf,  # noqa: E402
                    initialized, make_node, wait_for)
from fakecloud import HETZNER_TOKEN, FakeCloud  # noqa: E402
from fakekubeclient import FakeKube  # noqa: E402

import yaml  # noqa: E402

OS_PASSWORD = "demo-password"
CONTROLLER = build("controller", "cloudnode-controller")


def token_of(kubeconfig):
    with open(kubeconfig) as f:
        return yaml.safe_load(f)["users"][0]["user"]["token"]


def forms(secret):
    return {secret, base64.b64encode(secret.encode()).decode(), urllib.parse.quote(secret, safe="")}


def openstack_conf(path, url):
    with open(path, "w") as f:
        f.write("[Global]\nauth-url = %s/v3\nusername = demo\npassword = %s\nuser-domain-name = Default\n"
                "domain-name = Default\nproject-name = demo\n" % (url, OS_PASSWORD))
    os.chmod(path, 0o600)
    return path


def http_get(url):
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.read().decode("utf-8", "replace")
    except OSError as e:
        return "unreachable: %s" % e


def initializer_flows(t, k, c, d, texts):
    """Cluster-mode initializer, Hetzner then OpenStack; each initializes two Nodes through faults."""
    kc = k.kubeconfig_for(CLUSTER_SA)
    for provider in ("hetzner", "openstack"):
        names = ["%s-s%d" % (provider, n) for n in (1, 2)]
        for name in names:
            c.add_instance({"platform": provider, "name": name})
            make_node(k, name)
        if provider == "hetzner":
            conf = hetzner_conf(os.path.join(d, "hetzner.conf"), c.url, HETZNER_TOKEN)
            c.fail({"service": "api", "status": 401, "count": 1})
            c.fail({"service": "api", "status": 500, "count": 1})
        else:
            conf = openstack_conf(os.path.join(d, "openstack.conf"), c.url)
            c.fail({"service": "identity", "status": 401, "count": 1})
            c.fail({"service": "compute", "status": 500, "count": 1})
        args = ["--kubeconfig=" + kc, "--cloud-provider=" + provider, "--cloud-config=" + conf,
                "--leader-elect=false", "--controllers=cloud-node", "--bind-address=127.0.0.1", "-v", "10"]
        with Initializer(args, state_dir=d, name="init-" + provider) as i:
            done = wait_for(lambda: all(initialized(k, n) for n in names), 60)
            t.ok(done, "%s: initializer initializes both Nodes through 401/500 answers" % provider,
                 i.log()[-2000:])
            st, metrics = i.get("/metrics")
            t.eq(st, 200, "%s: initializer /metrics" % provider)
            texts["initializer-%s metrics" % provider] = metrics
            i.stop()
            texts["initializer-%s log" % provider] = i.log()
        c.clear_faults()
    ok = [r for r in c.requests() if r.get("service") in ("api", "identity") and r.get("status") in (200, 201)]
    t.ok(any(r["service"] == "api" for r in ok) and any(r["service"] == "identity" for r in ok),
         "the Hetzner token and the Keystone password were accepted by the clouds",
         sorted({(r.get("service"), r.get("status")) for r in c.requests()}))


def controller_flow(t, k, c, d, texts):
    m = machines_helpers()
    env = m.Env(k, c, d)
    env.setup()
    # 500, not 401: the controller treats 401 as a terminal machine failure (failureReason).
    c.fail({"service": "api", "status": 500, "count": 1})
    port = free_port()
    log = open(os.path.join(d, "controller.log"), "a+")  # appended to: log.seek(0) moves the writer too
    p = subprocess.Popen([CONTROLLER, "run", "--kubeconfig", k.kubeconfig_for(m.USER), "--namespace", "cloudnode",
                          "--cloud-config-source", "cloudnode/cloud-provider-config", "--leader-elect=false",
                          "--cloud-provider", "hetzner", "--port", str(port), "--machine-provider", "hetzner", "--machine-cloud-config", env.conf,
                          "-v", "10"], stdout=log, stderr=subprocess.STDOUT)
    try:
        env.machine("sec-m1")
        if not t.ok(wait_for(lambda: env.ready("sec-m1"), 60), "controller: machine provisioned with the Hetzner token"):
            log.seek(0)
            t.diag(log.read()[-3000:])
        texts["controller metrics"] = http_get("http://127.0.0.1:%d/metrics" % port)
        t.ok(texts["controller metrics"].startswith("#") or "cloudnode_" in texts["controller metrics"],
             "controller: /metrics served", texts["controller metrics"][:300])
    finally:
        c.clear_faults()
        p.terminate()
        try:
            t.eq(p.wait(10), 0, "controller: clean exit on SIGTERM")
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
    log.seek(0)
    texts["controller log"] = log.read()


def render_flow(t, d, files):
    """`render` copies the cloud config (a credential file) and writes manifests that must not."""
    infra = os.path.join(d, "infra.yaml")
    with open(infra, "w") as f:
        yaml.safe_dump({"apiVersion": "config.openshift.io/v1", "kind": "Infrastructure",
                        "metadata": {"name": "cluster"},
                        "spec": {"platformSpec": {"type": "OpenStack"}},
                        "status": {"platform": "OpenStack", "platformStatus": {"type": "OpenStack"},
                                   "controlPlaneTopology": "HighlyAvailable"}}, f)
    images = os.path.join(d, "images.json")
    with open(images, "w") as f:
        json.dump({"cloudControllerManager": "registry.example/cn:7", "cloudNodeManager": "registry.example/cn:7"}, f)
    conf = os.path.join(d, "render-cloud.yaml")
    with open(conf, "w") as f:
        yaml.safe_dump({"Global": {"auth-url": "https://keystone.example:5000/v3", "username": "demo",
                                   "password": OS_PASSWORD, "region": "RegionOne"}}, f)
    dest = os.path.join(d, "render-out")
    p = subprocess.run([CONTROLLER, "render", "--dest-dir", dest, "--cluster-infrastructure-file", infra,
                        "--images-file", images, "--cloud-config-file", conf, "-v", "10"],
                       capture_output=True, text=True)
    t.eq(p.returncode, 0, "render with an OpenStack password succeeds") or t.diag(p.stderr)
    files["render output"] = p.stdout + p.stderr
    creds = []
    for root, _, names in os.walk(dest):
        for n in names:
            path = os.path.join(root, n)
            with open(path, "rb") as f:
                data = f.read().decode("utf-8", "replace")
            if OS_PASSWORD in data:
                creds.append(os.path.relpath(path, dest))
                mode = os.stat(path).st_mode & 0o777
                t.eq(mode, 0o600, "credential file %s is 0600" % os.path.relpath(path, dest))
            else:
                files["render " + os.path.relpath(path, dest)] = data
    t.eq(creds, [os.path.join("config", "cloud.conf")], "the password is only in the rendered cloud.conf")


def main():
    t = Tap()
    for b in (INITIALIZER, CONTROLLER):
        if not os.access(b, os.X_OK):
            t.bail_out("%s is not built" % b)
    d = tempfile.mkdtemp(prefix="cn-secrets-")
    texts = {}
    secrets = set()
    found = []
    try:
        rbac = RBAC + [src("manifests", "controller", "controller-rbac.yaml"),
                       src("manifests", "overlays", "capi", "controller-capi-rbac.yaml")]
        with FakeKube(os.path.join(d, "kube"), rbac=rbac) as k, FakeCloud(os.path.join(d, "cloud")) as c:
            c.settings(build_seconds=0.3, action_seconds=0.2)
            try:
                initializer_flows(t, k, c, d, texts)
            except Exception as e:  # a failed flow is a failed test, the search still runs
                t.ok(False, "initializer flows raised", repr(e))
            try:
                controller_flow(t, k, c, d, texts)
            except Exception as e:
                t.ok(False, "controller flow raised", repr(e))
            for user in (CLUSTER_SA, "system:serviceaccount:cloudnode:cloudnode-controller"):
                secrets.add(token_of(k.kubeconfig_for(user)))
            for path in ("/api/v1/events", "/apis/events.k8s.io/v1/events", "/api/v1/nodes",
                         "/apis/infrastructure.cluster.x-k8s.io/v1beta2/cloudnodemachines"):
                st, out = k.api("GET", path)
                if st == 200:
                    texts["API " + path] = json.dumps(out)
            t.ok(any("events" in key and '"reason"' in v for key, v in texts.items()),
                 "the flows produced Events to search", sorted(texts))
        render_flow(t, d, texts)
        secrets.update({HETZNER_TOKEN, OS_PASSWORD})
        for s in secrets:
            for form in forms(s):
                found += ["%s in %s" % ("secret#%d" % sorted(secrets).index(s), where)
                          for where, text in texts.items() if form in text]
        total = sum(len(v) for v in texts.values())
        t.ok(total > 10000 and len(texts) >= 8, "searched %d sources, %d bytes" % (len(texts), total), sorted(texts))
        t.ok(not found, "no token or password appears in any log, event, object, metrics output or written file",
             found)
    finally:
        shutil.rmtree(d, ignore_errors=True)
    record({"test": "secrets", "secrets": len(secrets), "sources": len(texts),
            "bytes": sum(len(v) for v in texts.values()), "found": len(found)})
    sys.exit(t.done())


if __name__ == "__main__":
    main()
