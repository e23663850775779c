#!/usr/bin/env python3
"""tests/fake-cloud serving instances at 169.254.169.254:80 inside network namespaces, one
--instance process per namespace, all sharing the main server's inventory."""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from cntap import Tap  # noqa: E402
from fakecloud import HETZNER_TOKEN, FakeCloud, Netns  # noqa: E402

# Runs inside the namespace: fetch each (method, path, headers) in order, print the results
# as JSON. A token from a PUT is substituted for "$TOKEN" in later headers.
CLIENT = r"""
import json, sys, urllib.request, urllib.error
out, token = [], None
for method, path, headers in json.loads(sys.argv[1]):
    headers = {k: (token if v == "$TOKEN" else v) for k, v in headers.items()}
    req = urllib.request.Request("http://169.254.169.254" + path, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            status, body = r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        status, body = e.code, e.read().decode()
    if method == "PUT" and status == 200:
        token = body
    out.append([status, body])
print(json.dumps(out))
"""


def fetch(ns, calls):
    r = ns.run([sys.executable, "-c", CLIENT, json.dumps(calls)], capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        raise RuntimeError("client in %s failed: %s" % (ns.name, r.stderr))
    return json.loads(r.stdout)


def test_namespaces(t, tmp):
    state = os.path.join(tmp, "state")
    with FakeCloud(state) as main:
        aws = main.add_instance({"platform": "aws", "name": "a1", "require_token": True})
        gcp = main.add_instance({"platform": "gcp", "name": "g1"})
        with Netns(instance=aws) as ns1, Netns(instance=gcp) as ns2, \
                FakeCloud(state, instance=aws["id"], netns=ns1.name, listen="169.254.169.254:80") as s1, \
                FakeCloud(state, instance=gcp["id"], netns=ns2.name, listen="169.254.169.254:80"):
            t.eq(s1.url, "http://169.254.169.254:80", "namespace server prints its URL")
            addrs = ns1.run(["ip", "-j", "addr", "show", "dev", "eth0"],
                            capture_output=True, text=True, check=True).stdout
            have = {a["local"] for link in json.loads(addrs) for a in link.get("addr_info", [])}
            t.ok(aws["private_ipv4"] in have and aws["ipv6"] in have, "namespace eth0 carries the instance addresses", have)
            res = fetch(ns1, [
                ["GET", "/latest/meta-data/instance-id", {}],
                ["PUT", "/latest/api/token", {"X-aws-ec2-metadata-token-ttl-seconds": "60"}],
                ["GET", "/latest/meta-data/instance-id", {"X-aws-ec2-metadata-token": "$TOKEN"}],
                ["GET", "/latest/meta-data/local-ipv4", {"X-aws-ec2-metadata-token": "$TOKEN"}],
            ])
            t.eq(res[0][0], 401, "aws in ns1: token required at 169.254.169.254")
            t.eq(res[2], [200, aws["id"]], "aws in ns1: instance-id with token")
            t.eq(res[3], [200, aws["private_ipv4"]], "aws in ns1: local-ipv4")
            res = fetch(ns2, [
                ["GET", "/computeMetadata/v1/instance/name", {"Metadata-Flavor": "Google"}],
                ["GET", "/computeMetadata/v1/instance/name", {}],
            ])
            t.eq(res[0], [200, "g1"], "gcp in ns2: same address, other instance")
            t.eq(res[1][0], 403, "gcp in ns2: header still required")
            # Changes made through the main server reach the namespace servers.
            main.update_instance(gcp["id"], {"name": "g1-renamed"})
            res = fetch(ns2, [["GET", "/computeMetadata/v1/instance/name", {"Metadata-Flavor": "Google"}]])
            t.eq(res[0], [200, "g1-renamed"], "inventory shared with the main server")
            # Faults set on the main server apply in the namespaces.
            main.fail({"instance": aws["id"], "count": 1, "status": 503})
            res = fetch(ns1, [["GET", "/latest/meta-data/instance-id", {}]])
            t.eq(res[0][0], 503, "fault from the main admin API applies in the namespace")
            log = main.requests()
            t.ok(any(e["instance"] == gcp["id"] and e["path"] == "/computeMetadata/v1/instance/name"
                     for e in log), "namespace requests are in the shared log")


def test_boot_created_server(t, tmp):
    """A server created through the Hetzner API, then "booted": its metadata served in a namespace."""
    state = os.path.join(tmp, "boot")
    with FakeCloud(state, extra_args=["--action-seconds", "0"]) as main:
        st, _, out = main.api("POST", "/v1/servers", {"name": "node-a", "server_type": "cx22", "image": "debian-12",
                                                      "networks": [4711]},
                              {"Authorization": "Bearer " + HETZNER_TOKEN})
        t.eq(st, 201, "server created")
        inst = main.get_instance(str(out["server"]["id"]))
        with Netns(instance=inst) as ns, \
                FakeCloud(state, instance=inst["id"], netns=ns.name, listen="169.254.169.254:80"):
            res = fetch(ns, [["GET", "/hetzner/v1/metadata/instance-id", {}],
                             ["GET", "/hetzner/v1/metadata/private-networks", {}]])
            t.eq(res[0], [200, inst["id"]], "booted server sees its own id")
            t.ok(res[1][0] == 200 and inst["private_ipv4"] in res[1][1], "booted server sees its private network",
                 res[1])


def main():
    t = Tap()
    if os.geteuid() != 0:
        t.skip_all("network namespaces need root")
    probe = subprocess.run(["ip", "netns", "add", "cn-fc-probe-%d" % os.getpid()], capture_output=True, text=True)
    if probe.returncode != 0:
        t.bail_out("cannot create a network namespace as root: %s" % probe.stderr.strip())
    subprocess.run(["ip", "netns", "del", "cn-fc-probe-%d" % os.getpid()], capture_output=True)
    with tempfile.TemporaryDirectory(prefix="cn-fake-netns-") as tmp:
        for fn in (test_namespaces, test_boot_created_server):
            t.run(fn, tmp)
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
