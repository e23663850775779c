#!/usr/bin/env python3
"""tests/fake-cloud metadata services: paths, required headers and tokens, error bodies, and
the shared inventory (instances added through the admin API appear in the services)."""
import base64
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from cntap import Tap  # noqa: E402
from fakecloud import FakeCloud  # noqa: E402


def test_aws(t, tmp):
    with FakeCloud(os.path.join(tmp, "aws"), platform="aws") as c:
        inst = c.instance
        t.eq(inst["platform"], "aws", "default instance is aws")
        st, h, body = c.get("/latest/meta-data/instance-id")
        t.eq((st, body), (200, inst["id"]), "IMDSv1 GET instance-id without token")
        t.eq(h.get("Server"), "EC2ws", "Server header like IMDS")
        st, _, body = c.get("/latest/meta-data/")
        names = body.split("\n")
        for k in ("instance-id", "instance-type", "local-ipv4", "public-ipv4", "local-hostname",
                  "hostname", "mac", "placement/", "network/"):
            t.ok(k in names, "meta-data/ lists %s" % k, body)
        st, _, body = c.get("/2021-01-03/meta-data/placement/availability-zone")
        t.eq((st, body), (200, inst["zone"]), "dated version prefix")
        t.eq(c.get("/latest/meta-data/placement/region")[2], inst["region"], "placement/region")
        t.eq(c.get("/1999-01-01/meta-data/instance-id")[0], 404, "unknown version is 404")
        st, h, body = c.get("/latest/meta-data/no-such-key")
        t.ok(st == 404 and "404 - Not Found" in body and h["Content-Type"] == "text/html",
             "unknown key: 404 with the IMDS HTML body", (st, h, body))
        mac = c.get("/latest/meta-data/mac")[2]
        t.eq(c.get("/latest/meta-data/network/interfaces/macs/")[2], mac + "/", "macs/ lists the mac")
        t.eq(c.get("/latest/meta-data/network/interfaces/macs/%s/ipv6s" % mac)[2], inst["ipv6"], "ipv6s")
        t.eq(c.get("/latest/meta-data/network/interfaces/macs/%s/local-ipv4s" % mac)[2],
             inst["private_ipv4"], "local-ipv4s")
        st, _, doc = c.get("/latest/dynamic/instance-identity/document")
        doc = json.loads(doc)
        t.eq((doc["instanceId"], doc["region"], doc["availabilityZone"], doc["privateIp"]),
             (inst["id"], inst["region"], inst["zone"], inst["private_ipv4"]), "identity document")
        t.eq(c.get("/latest/user-data")[0], 404, "no user-data is 404")

        # IMDSv2 tokens
        st, _, _ = c.api("PUT", "/latest/api/token")
        t.eq(st, 400, "token PUT without TTL header is 400")
        st, _, _ = c.api("PUT", "/latest/api/token", headers={"X-aws-ec2-metadata-token-ttl-seconds": "0"})
        t.eq(st, 400, "TTL 0 is 400")
        st, _, _ = c.api("PUT", "/latest/api/token", headers={"X-aws-ec2-metadata-token-ttl-seconds": "21601"})
        t.eq(st, 400, "TTL above 21600 is 400")
        st, _, _ = c.api("PUT", "/latest/api/token", headers={"X-aws-ec2-metadata-token-ttl-seconds": "60",
                                                              "X-Forwarded-For": "192.0.2.1"})
        t.eq(st, 403, "token PUT through a proxy (X-Forwarded-For) is refused")
        t.eq(c.get("/latest/api/token")[0], 405, "GET on the token path is 405")
        st, h, token = c.api("PUT", "/latest/api/token", headers={"X-aws-ec2-metadata-token-ttl-seconds": "3"})
        t.ok(st == 200 and len(token) > 20, "token issued", (st, token))
        t.eq(h.get("X-aws-ec2-metadata-token-ttl-seconds"), "3", "token response echoes the TTL")
        st, h, body = c.get("/latest/meta-data/instance-id", {"X-aws-ec2-metadata-token": token})
        t.eq((st, body), (200, inst["id"]), "GET with token")
        t.ok("X-aws-ec2-metadata-token-ttl-seconds" in h, "GET with token reports remaining TTL")
        t.eq(c.get("/latest/meta-data/instance-id", {"X-aws-ec2-metadata-token": token + "x"})[0], 401,
             "tampered token is 401")
        time.sleep(3.2)
        t.eq(c.get("/latest/meta-data/instance-id", {"X-aws-ec2-metadata-token": token})[0], 401,
             "expired token is 401")

        # IMDSv2 required
        v2 = c.add_instance({"platform": "aws", "name": "v2only", "require_token": True,
                             "user_data": "#!/bin/sh\necho hi\n"})
        base = c.metadata_url(v2["id"])
        st, h, body = c.get("/latest/meta-data/instance-id", base=base)
        t.ok(st == 401 and "401 - Unauthorized" in body, "token required: GET without token is 401", (st, body))
        _, _, tok = c.api("PUT", "/latest/api/token", headers={"X-aws-ec2-metadata-token-ttl-seconds": "300"},
                          base=base)
        t.eq(c.get("/latest/meta-data/instance-id", {"X-aws-ec2-metadata-token": tok}, base=base)[2], v2["id"],
             "token required: GET with token works")
        t.eq(c.get("/latest/meta-data/instance-id", {"X-aws-ec2-metadata-token": token}, base=base)[0], 401,
             "a token of another instance is refused")
        t.eq(c.get("/latest/user-data", {"X-aws-ec2-metadata-token": tok}, base=base)[2], "#!/bin/sh\necho hi\n",
             "user-data served")
        st, _, body = c.get("/latest/meta-data/instance-id", {"X-Fake-Cloud-Instance": v2["id"],
                                                              "X-aws-ec2-metadata-token": tok})
        t.eq(body, v2["id"], "instance chosen by header")


def test_openstack(t, tmp):
    with FakeCloud(os.path.join(tmp, "os"), platform="openstack") as c:
        inst = c.update_instance(c.instance["id"], {"labels": {"role": "worker"}, "user_data": "#cloud-config\n"})
        st, h, md = c.get("/openstack/latest/meta_data.json")
        t.eq(st, 200, "meta_data.json 200")
        t.eq((md["uuid"], md["name"], md["availability_zone"], md["meta"]),
             (inst["id"], inst["name"], inst["zone"], {"role": "worker"}), "meta_data.json content")
        t.ok(md["hostname"].startswith(inst["name"]), "hostname")
        st, _, nd = c.get("/openstack/2018-08-27/network_data.json")
        t.eq(st, 200, "dated network_data.json")
        ips = [n.get("ip_address") for n in nd["networks"]]
        t.ok(inst["private_ipv4"] in ips and inst["ipv6"] in ips, "network_data has the addresses", nd)
        t.eq(nd["links"][0]["ethernet_mac_address"], inst["mac"], "link mac")
        t.eq(c.get("/openstack/2012-08-10/network_data.json")[0], 404, "2012-08-10 has no network_data.json")
        t.ok("latest" in c.get("/openstack/")[2].split("\n"), "/openstack/ lists latest")
        t.eq(c.get("/openstack/latest/user_data")[2], "#cloud-config\n", "user_data")
        t.eq(c.get("/latest/meta-data/local-ipv4")[2], inst["private_ipv4"], "EC2 tree local-ipv4")
        t.eq(c.get("/2009-04-04/meta-data/placement/availability-zone")[2], inst["zone"], "EC2 tree dated")
        t.ok(c.get("/latest/meta-data/instance-id")[2].startswith("i-"), "EC2 instance-id")


def test_hetzner(t, tmp):
    with FakeCloud(os.path.join(tmp, "hz"), platform="hetzner") as c:
        vendor = "#cloud-config\nruncmd:\n  - [echo, 'hi']\n"
        inst = c.update_instance(c.instance["id"], {"ssh_keys": ["ssh-ed25519 AAAAC3Nz test"], "vendor_data": vendor})
        st, h, body = c.get("/hetzner/v1/metadata")
        t.eq(st, 200, "metadata 200")
        t.ok("hostname: %s\n" % inst["hostname"] in body, "YAML hostname", body)
        t.ok("instance-id: %s\n" % inst["id"] in body, "YAML instance-id (integer)", body)
        t.ok("public-ipv4: %s\n" % inst["public_ipv4"] in body, "YAML public-ipv4", body)
        t.ok("region: %s\n" % inst["region"] in body and "availability-zone: %s\n" % inst["zone"] in body,
             "YAML region and zone", body)
        t.ok("    - ssh-ed25519 AAAAC3Nz test\n" in body, "YAML public-keys list", body)
        t.ok("vendor_data: %s\n" % json.dumps(vendor) in body, "multi-line vendor_data double-quoted", body)
        t.eq(c.get("/hetzner/v1/metadata/hostname")[2], inst["hostname"], "sub-path hostname is plain text")
        t.eq(c.get("/hetzner/v1/metadata/instance-id")[2], inst["id"], "sub-path instance-id")
        st, _, pn = c.get("/hetzner/v1/metadata/private-networks")
        t.ok(st == 200 and ("- ip: %s\n" % inst["private_ipv4"]) in pn, "private-networks YAML", pn)
        t.ok("mac_address:" in pn and "network_id:" in pn, "private-networks fields", pn)
        t.ok("version: 1" in c.get("/hetzner/v1/metadata/network-config")[2], "network-config")
        t.eq(c.get("/hetzner/v1/metadata/nope")[0], 404, "unknown key 404")


def test_gcp(t, tmp):
    with FakeCloud(os.path.join(tmp, "gcp"), platform="gcp") as c:
        inst = c.instance
        G = {"Metadata-Flavor": "Google"}
        st, h, body = c.get("/computeMetadata/v1/instance/hostname")
        t.ok(st == 403 and "Missing Metadata-Flavor:Google header" in body, "no header: 403", (st, body))
        st, h, body = c.get("/computeMetadata/v1/instance/hostname", {"X-Google-Metadata-Request": "True"})
        t.eq(st, 403, "v1beta1's legacy header is not enough for v1")
        st, h, body = c.get("/computeMetadata/v1/instance/hostname", G)
        t.eq((st, body), (200, inst["hostname"]), "hostname with header")
        t.eq(h.get("Metadata-Flavor"), "Google", "response carries Metadata-Flavor")
        t.eq(c.get("/computeMetadata/v1/instance/id", G)[2], inst["id"], "id")
        t.eq(c.get("/computeMetadata/v1/instance/zone", G)[2].rsplit("/", 1)[1], inst["zone"], "zone path")
        t.eq(c.get("/computeMetadata/v1/instance/machine-type", G)[2].rsplit("/", 1)[1], inst["type"], "machine-type")
        t.eq(c.get("/computeMetadata/v1/instance/network-interfaces/0/ip", G)[2], inst["private_ipv4"], "nic ip")
        t.eq(c.get("/computeMetadata/v1/instance/network-interfaces/0/access-configs/0/external-ip", G)[2],
             inst["public_ipv4"], "external-ip")
        st, h, body = c.get("/computeMetadata/v1/instance/network-interfaces", G)
        t.ok(st == 301 and h["Location"].endswith("/computeMetadata/v1/instance/network-interfaces/"),
             "directory without slash redirects", (st, h))
        st, h, doc = c.get("/computeMetadata/v1/instance/?recursive=true&alt=json", G)
        t.ok(st == 200 and isinstance(doc, dict), "recursive JSON", doc)
        t.eq(doc["networkInterfaces"][0]["accessConfigs"][0]["externalIp"], inst["public_ipv4"],
             "recursive JSON uses camelCase and arrays")
        t.eq(doc["machineType"].rsplit("/", 1)[1], inst["type"], "recursive machineType")
        st, _, doc = c.get("/computeMetadata/v1/?recursive=true", G)
        t.eq(doc["project"]["projectId"], "cloudnode-test", "recursive root defaults to JSON")
        t.eq(c.get("/computeMetadata/v1/instance/hostname", dict(G, **{"X-Forwarded-For": "1.2.3.4"}))[0], 403,
             "X-Forwarded-For refused")
        t.eq(c.get("/computeMetadata/v1/instance/attributes/user-data", G)[0], 404, "absent attribute 404")


def test_azure(t, tmp):
    with FakeCloud(os.path.join(tmp, "az"), platform="azure") as c:
        t.eq(c.settings()["azure_imds_requests_per_second"], 5, "IMDS limit defaults to the documented 5/s")
        c.settings(azure_imds_requests_per_second=0)
        inst = c.update_instance(c.instance["id"], {"labels": {"env": "test"}, "user_data": "hello"})
        M = {"Metadata": "true"}
        st, h, body = c.get("/metadata/instance?api-version=2021-02-01")
        t.ok(st == 400 and body == {"error": "Bad request. Required metadata header not specified"},
             "no Metadata header: 400 JSON error", (st, body))
        st, h, body = c.get("/metadata/instance", M)
        t.ok(st == 400 and "api-version" in body["error"] and body.get("newest-versions"),
             "no api-version: 400 with newest-versions", body)
        t.eq(c.get("/metadata/instance?api-version=1999-01-01", M)[0], 400, "unknown api-version 400")
        st, h, doc = c.get("/metadata/instance?api-version=2021-02-01", M)
        t.eq(st, 200, "instance document")
        t.ok(h["Content-Type"].startswith("application/json"), "JSON content type")
        comp = doc["compute"]
        t.eq((comp["vmId"], comp["name"], comp["vmSize"], comp["location"], comp["zone"]),
             (inst["id"], inst["name"], inst["type"], inst["region"], inst["zone"]), "compute fields")
        t.eq(comp["tagsList"], [{"name": "env", "value": "test"}], "tagsList")
        ip = doc["network"]["interface"][0]["ipv4"]["ipAddress"][0]
        t.eq((ip["privateIpAddress"], ip["publicIpAddress"]), (inst["private_ipv4"], inst["public_ipv4"]), "ipv4")
        st, h, body = c.get("/metadata/instance/compute/vmSize?api-version=2017-08-01&format=text", M)
        t.eq((st, body), (200, inst["type"]), "format=text leaf")
        t.ok(h["Content-Type"].startswith("text/plain"), "text leaf content type")
        t.eq(c.get("/metadata/instance/compute/name?api-version=2021-02-01", M)[0], 400,
             "leaf without format=text is 400 (format=json does not work for leaves)")
        st, _, keys = c.get("/metadata/instance/compute/tagsList?api-version=2021-02-01", M)
        t.eq((st, keys), (200, [{"name": "env", "value": "test"}]), "non-leaf sub-path as JSON")
        t.eq(c.get("/metadata/instance/network/interface/0/ipv4/ipAddress/0/privateIpAddress"
                   "?api-version=2021-02-01&format=text", M)[2], inst["private_ipv4"], "array index path")
        t.eq(base64.b64decode(c.get("/metadata/instance/compute/userData?api-version=2021-01-01&format=text",
                                    M)[2]), b"hello", "userData is base64")
        t.eq(c.get("/metadata/instance/compute?api-version=2021-02-01&format=text", M)[0], 400,
             "format=text on a non-leaf 400")
        st, _, body = c.get("/metadata/instance/compute/nothing?api-version=2021-02-01", M)
        t.eq(st, 404, "unknown path 404")
        t.eq(c.get("/metadata/instance?api-version=2021-02-01", dict(M, **{"X-Forwarded-For": "1.2.3.4"}))[0],
             400, "X-Forwarded-For refused")
        # One request per two seconds: the second one in a row is over the limit.
        c.settings(azure_imds_requests_per_second=0.5)
        got = [c.get("/metadata/instance/compute/name?api-version=2021-02-01&format=text", M) for _ in range(2)]
        t.eq([g[0] for g in got], [200, 429], "over the IMDS rate: 429")
        t.eq(got[1][2], {"error": "Too many requests"}, "429 body is JSON")


def test_digitalocean(t, tmp):
    with FakeCloud(os.path.join(tmp, "do"), platform="digitalocean") as c:
        inst = c.update_instance(c.instance["id"], {"labels": {"k8s": ""}})
        st, h, doc = c.get("/metadata/v1.json")
        t.eq(st, 200, "v1.json")
        t.eq((doc["droplet_id"], doc["hostname"], doc["region"]), (int(inst["id"]), inst["hostname"], inst["region"]),
             "v1.json fields")
        t.eq(doc["interfaces"]["public"][0]["ipv4"]["ip_address"], inst["public_ipv4"], "public ipv4")
        t.eq(doc["interfaces"]["private"][0]["ipv4"]["ip_address"], inst["private_ipv4"], "private ipv4")
        t.eq(c.get("/metadata/v1/id")[2], inst["id"], "leaf id")
        t.eq(c.get("/metadata/v1/region")[2], inst["region"], "leaf region")
        t.eq(c.get("/metadata/v1/interfaces/public/0/ipv4/address")[2], inst["public_ipv4"], "leaf public address")
        t.eq(c.get("/metadata/v1/interfaces/private/0/ipv4/address")[2], inst["private_ipv4"], "leaf private address")
        t.ok("interfaces/" in c.get("/metadata/v1/")[2].split("\n"), "index lists interfaces/")
        t.eq(c.get("/metadata/v1/tags/")[2], "k8s", "tags")
        t.eq(c.get("/metadata/v1/user-data")[0], 404, "no user-data 404")


def test_inventory(t, tmp):
    d = os.path.join(tmp, "inv")
    with FakeCloud(d) as c:
        t.eq(c.get("/latest/meta-data/instance-id")[0], 404, "no default instance without platform")
        a = c.add_instance({"platform": "gcp", "name": "gce-1", "labels": {"a": "b"}})
        b = c.add_instance({"platform": "aws", "name": "ec2-1", "private_ipv4": "10.1.2.3", "public_ipv4": None})
        t.ok(a["private_ipv4"] != b["private_ipv4"], "distinct addresses allocated")
        t.eq([i["id"] for i in c.instances()], [a["id"], b["id"]], "instances listed in order")
        t.eq(c.get("/latest/meta-data/local-ipv4", base=c.metadata_url(b["id"]))[2], "10.1.2.3",
             "explicit address served")
        t.eq(c.get("/latest/meta-data/public-ipv4", base=c.metadata_url(b["id"]))[0], 404,
             "no public address: key absent")
        st, _, err = c._admin("POST", "/instances", {"platform": "nope"})
        t.ok(st == 400 and "platform" in err["error"], "bad platform rejected with a clear error", err)
        st, _, err = c._admin("POST", "/instances", {"platform": "aws", "colour": "red"})
        t.ok(st == 400 and "colour" in err["error"], "unknown field named", err)
        st, _, _ = c._admin("POST", "/instances", {"platform": "aws", "id": a["id"]})
        t.eq(st, 409, "duplicate id 409")
        t.eq(c.stop(b["id"])["status"], "stopped", "stop instance")
        t.eq(c.start(b["id"])["status"], "running", "start instance")
        # A second server on the same directory sees the same inventory.
        with FakeCloud(d, instance=a["id"]) as c2:
            st, _, body = c2.get("/computeMetadata/v1/instance/name", {"Metadata-Flavor": "Google"})
            t.eq((st, body), (200, "gce-1"), "--instance server serves that instance at the root")
            t.ok(c2.get("/_admin/instances")[0] != 200, "--instance server has no admin API")
            c.update_instance(a["id"], {"name": "gce-renamed"})
            t.eq(c2.get("/computeMetadata/v1/instance/name", {"Metadata-Flavor": "Google"})[2], "gce-renamed",
                 "changes through the main server are visible")
        c.remove_instance(a["id"])
        t.eq(c.get("/computeMetadata/v1/instance/name", {"Metadata-Flavor": "Google"}, base=c.metadata_url(a["id"]))[0],
             404, "removed instance is gone")
        log = c.requests()
        t.ok(any(e["path"] == "/latest/meta-data/local-ipv4" and e["status"] == 200 and e["instance"] == b["id"]
                 for e in log), "request log records path, status and instance")
        c.instances()
        c.settings()
        t.eq(len(c.requests()), len(log), "admin calls are not logged")
        with open(os.path.join(d, "requests.jsonl")) as f:
            t.eq(len(f.read().splitlines()), len(log), "log file is one JSON line per request")


def main():
    t = Tap()
    with tempfile.TemporaryDirectory(prefix="cn-fake-cloud-") as tmp:
        for fn in (test_aws, test_openstack, test_hetzner, test_gcp, test_azure, test_digitalocean,
                   test_inventory):
            t.run(fn, tmp)
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
