#!/usr/bin/env python3
"""Compare tests/fake-cloud's responses with real captured ones in tests/data/fixtures (see its
SOURCES.md): same paths answer, and every key a captured document has exists in ours with a
compatible type; metadata leaves are single lines as captured. Our data is our own; only shapes
are compared. The API responses of AWS, Google Cloud, Azure and DigitalOcean are Apache
libcloud's captures. The fixtures hold no DigitalOcean metadata: that is reported as skipped, and
fails once such captures appear without a comparison here."""
import json
import os
import re
import sys
import tempfile
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from cntap import FIXTURES, Tap  # noqa: E402
from fakecloud import DO_TOKEN, HETZNER_TOKEN, OPENSTACK_USER, FakeCloud  # noqa: E402

KEY_OK = ("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBH3mSXo8MIEa6yYW4FeN4hHXvoNz4WdDugKvq4S0dJc "
          "fixture@example")
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFakeKeyForShapeComparison test@example"


def fx(*p):
    return os.path.join(FIXTURES, *p)


def load(*p):
    with open(fx(*p), encoding="utf-8") as f:
        return json.load(f)


def text(*p):
    with open(fx(*p), encoding="utf-8") as f:
        return f.read()


def _kind(v):
    if v is None:
        return None
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, (int, float)):
        return "number"
    return type(v).__name__


def shape_diff(want, got, path="", ignore=(), maps=()):
    """Places where `got` lacks a key of `want` or has an incompatible type (null matches any).
    Objects named in maps are keyed by data (e.g. key names), so only their values are compared."""
    out = []
    if isinstance(want, dict) and isinstance(got, dict) and path.rsplit("/", 1)[-1] in maps:
        if want and got:
            out.extend(shape_diff(next(iter(want.values())), next(iter(got.values())), path + "/*", ignore, maps))
        elif want and not got:
            out.append("empty " + path)
    elif isinstance(want, dict) and isinstance(got, dict):
        for k, v in want.items():
            p = path + "/" + k
            if k in ignore or p in ignore:
                continue
            if k not in got:
                out.append("missing " + p)
            else:
                out.extend(shape_diff(v, got[k], p, ignore, maps))
    elif isinstance(want, list) and isinstance(got, list):
        if want and got:
            out.extend(shape_diff(want[0], got[0], path + "[0]", ignore, maps))
    elif _kind(want) and _kind(got) and _kind(want) != _kind(got):
        out.append("type of %s: want %s, got %s" % (path, _kind(want), _kind(got)))
    return out


def yaml_keys(s):
    """Mapping keys used anywhere in a block-style YAML text (enough to compare shapes)."""
    return set(re.findall(r"^\s*(?:-\s+)?([A-Za-z_][A-Za-z0-9_-]*):", s, re.M))


def check_shape(t, want, got, name, ignore=(), maps=("public_keys", "labels")):
    diff = shape_diff(want, got, ignore=ignore, maps=maps)
    t.ok(not diff, name, "\n".join(diff))


# -- metadata ---------------------------------------------------------------------------


def test_aws(t, tmp):
    idx = load("metadata", "aws", "index.json")
    with FakeCloud(os.path.join(tmp, "aws"), platform="aws") as c:
        c.update_instance(c.instance["id"], {"ssh_keys": [KEY]})
        _, _, token = c.api("PUT", "/latest/api/token", headers={"X-aws-ec2-metadata-token-ttl-seconds": "21600"})
        for ep in idx["endpoints"]:
            if ep["method"] == "PUT":
                if ep["status"] == 200:
                    st, _, body = c.api("PUT", ep["path"], headers=ep["request_headers"])
                    t.ok(st == 200 and body, "aws PUT %s answers like the capture" % ep["path"])
                continue
            st, _, body = c.get(ep["path"], {"X-aws-ec2-metadata-token": token})
            t.eq(st, ep["status"], "aws GET %s status" % ep["path"])
            if idx.get("bodies_have_no_trailing_newline") and ep["path"].split("/")[-1] not in ("public-keys", "document"):
                t.ok(body and "\n" not in body, "aws GET %s: one line without a newline, as captured" % ep["path"], body)
            if ep["path"].endswith("instance-identity/document"):
                check_shape(t, json.loads(text("metadata", "aws", ep["file"])), json.loads(body),
                            "aws identity document has the captured keys")


def test_gcp(t, tmp):
    idx = load("metadata", "gcp", "index.json")
    with FakeCloud(os.path.join(tmp, "gcp"), platform="gcp") as c:
        for ep in idx["endpoints"]:
            st, _, body = c.get(ep["path"], idx["request_headers"])
            t.ok(st == ep["status"] and body and "\n" not in body, "gcp GET %s: a one-line leaf" % ep["path"], body)


def test_azure(t, tmp):
    idx = load("metadata", "azure", "index.json")
    with FakeCloud(os.path.join(tmp, "az"), platform="azure") as c:
        c.update_instance(c.instance["id"], {"ssh_keys": [KEY]})
        for ep in idx["endpoints"]:
            if not ep["host"].startswith("IMDS") or ep["file"] is None or ep["file"].endswith((".empty.json", "only")):
                continue
            st, h, body = c.get(ep["url"], ep.get("request_headers"))
            t.eq(st, ep["status"], "azure GET %s status" % ep["url"])
            want_ct = (ep.get("response_headers") or {}).get("content-type")
            if want_ct:
                t.ok(h.get("Content-Type", "").startswith(want_ct), "azure %s content type %s" % (ep["url"], want_ct), h)
            if ep["file"].endswith(".json"):
                check_shape(t, load("metadata", "azure", ep["file"]), body, "azure %s shape" % ep["url"])
            elif "format=text" in ep["url"] and text("metadata", "azure", ep["file"]).strip() == \
                    text("metadata", "azure", ep["file"]):
                # (afterburn's adminUsername mocks pad the value with blanks to test its trimming.)
                t.ok(body and body.strip() == body, "azure %s: text without blanks or a newline, as captured"
                     % ep["url"], body)


def test_hetzner(t, tmp):
    with FakeCloud(os.path.join(tmp, "hz"), platform="hetzner") as c:
        c.update_instance(c.instance["id"], {"ssh_keys": [KEY]})
        for ep in load("metadata", "hetzner", "index.json")["endpoints"]:
            st, _, body = c.get(ep["path"])
            t.eq(st, 200, "hetzner GET %s" % ep["path"])
            want = yaml_keys(text("metadata", "hetzner", ep["file"]))
            t.ok(want <= yaml_keys(body), "hetzner %s has the captured keys" % ep["path"],
                 "missing: %s" % sorted(want - yaml_keys(body)))
            top_want = re.findall(r"^([a-z][a-z_-]*):", text("metadata", "hetzner", ep["file"]), re.M)
            top_got = re.findall(r"^([a-z][a-z_-]*):", body, re.M)
            t.ok(set(top_want) <= set(top_got), "hetzner %s top-level keys" % ep["path"])


def test_openstack(t, tmp):
    with FakeCloud(os.path.join(tmp, "os"), platform="openstack") as c:
        c.update_instance(c.instance["id"], {"ssh_keys": [KEY]})
        _, _, md = c.get("/openstack/2012-08-10/meta_data.json")
        check_shape(t, load("metadata", "openstack-metadata", "openstack", "2012-08-10", "meta_data.json"), md,
                    "openstack meta_data.json (metadata service) shape")
        # admin_pass appears only when Nova injects a password.
        check_shape(t, load("metadata", "openstack-config-drive", "openstack", "meta_data.json"), md,
                    "openstack meta_data.json (config drive) shape", ignore=("admin_pass",))
        _, _, nd = c.get("/openstack/latest/network_data.json")
        want = load("metadata", "kubevirt", "config_drive", "openstack", "latest", "network_data.json")
        # KubeVirt names its links; Nova's links carry no name.
        check_shape(t, want, nd, "network_data.json shape", ignore=("/links[0]/name",))
        drive = os.path.join(tmp, "os-drive")
        c.write_config_drive(c.instance["id"], drive)
        with open(os.path.join(drive, "ec2", "latest", "meta-data.json")) as f:
            ec2 = json.load(f)
        check_shape(t, load("metadata", "openstack-config-drive", "ec2", "meta-data.json"), ec2,
                    "config drive ec2 meta-data.json shape")


def test_proxmoxve(t, tmp):
    with FakeCloud(os.path.join(tmp, "pve"), platform="proxmoxve") as c:
        drive = os.path.join(tmp, "pve-drive")
        files = c.write_config_drive(c.instance["id"], drive)
        want_files = sorted(os.listdir(fx("metadata", "proxmoxve", "static")))
        t.eq(sorted(files), want_files, "proxmoxve drive has the captured file set")
        for name in ("meta-data", "network-config"):
            with open(os.path.join(drive, name)) as f:
                got = yaml_keys(f.read())
            for variant in ("static", "dhcp"):
                want = yaml_keys(text("metadata", "proxmoxve", variant, name))
                t.ok(want <= got | {"dhcp"}, "proxmoxve %s keys (vs %s)" % (name, variant),
                     "missing: %s" % sorted(want - got))
        with open(os.path.join(drive, "user-data")) as f:
            t.ok(f.read().startswith("#cloud-config\n") and
                 text("metadata", "proxmoxve", "static", "user-data").startswith("#cloud-config\n"),
                 "proxmoxve user-data is #cloud-config like the capture")


# -- cloud APIs -------------------------------------------------------------------------


def test_hetzner_api(t, tmp):
    auth = {"Authorization": "Bearer " + HETZNER_TOKEN}
    with FakeCloud(os.path.join(tmp, "hapi")) as c:
        # The older hcloud-python sample gives images a "rebuild" protection flag; the API
        # reference and hcloud-go's newer capture protect images against delete only.
        old_image = ("/server/image/protection/rebuild", "/servers[0]/image/protection/rebuild")
        st, _, created = c.api("POST", "/v1/servers", {"name": "fx-1", "server_type": "cx22", "image": "debian-13",
                                                       "location": "hel1", "networks": [4711]}, auth)
        want = load("cloud-api", "hetzner", "POST_v1_servers.json")
        t.eq(st, 201, "POST /v1/servers status as documented")
        check_shape(t, want, created, "POST /v1/servers shape", ignore=old_image)
        sid = created["server"]["id"]
        _, _, got = c.get("/v1/servers/%d" % sid, auth)
        check_shape(t, load("cloud-api", "hetzner", "GET_v1_servers_id.json"), got, "GET /v1/servers/{id} shape")
        _, _, lst = c.get("/v1/servers", auth)
        check_shape(t, load("cloud-api", "hetzner", "GET_v1_servers.json"), lst, "GET /v1/servers shape",
                    ignore=old_image)
        _, _, a = c.get("/v1/actions/%d" % created["action"]["id"], auth)
        # The captured action carries an error object; ours has error null until one fails.
        check_shape(t, load("cloud-api", "hetzner", "action_object.json"), a["action"], "action object shape")
        st, _, err = c.api("POST", "/v1/servers", {"name": "fx-2", "server_type": "cx22", "image": "debian-13",
                                                   "labels": {"bad key": "x"}}, auth)
        check_shape(t, load("cloud-api", "hetzner", "error_422_invalid_input.json"), err, "invalid_input error shape")
        status = {f["file"]: f.get("status") for f in load("cloud-api", "hetzner", "index.json")["files"]}
        t.eq(st, status["error_422_invalid_input.json"], "invalid_input status as captured")
        c.throttle("hetzner", count=1)
        st, _, err = c.get("/v1/servers", auth)
        t.eq(st, 429, "throttled status")
        for f in ("error_429_rate_limit_exceeded.json", "error_429_rate_limit_exceeded.minimal.json"):
            check_shape(t, load("cloud-api", "hetzner", f), err, "%s shape" % f)
            t.eq(err["error"]["code"], load("cloud-api", "hetzner", f)["error"]["code"], "%s code" % f)


def test_hetzner_resources_api(t, tmp):
    """Images, SSH keys, networks, placement groups, load balancers and their types against the
    hcloud-python captures (those have every field the API documents for the object)."""
    auth = {"Authorization": "Bearer " + HETZNER_TOKEN}

    def call(method, path, body=None, want=200):
        st, _, doc = c.api(method, path, body, auth)
        t.eq(st, want, "%s %s status" % (method, path))
        return doc or {}

    with FakeCloud(os.path.join(tmp, "hres")) as c:
        net = call("POST", "/v1/networks", {"name": "fx-net", "ip_range": "10.10.0.0/16", "labels": {"a": "b"},
                                            "subnets": [{"type": "cloud", "ip_range": "10.10.1.0/24",
                                                         "network_zone": "eu-central"}],
                                            "routes": [{"destination": "10.100.1.0/24", "gateway": "10.10.1.1"}]}, 201)
        check_shape(t, load("cloud-api", "hetzner", "POST_v1_networks.json"), net, "POST /v1/networks shape")
        nid = net.get("network", {}).get("id")
        check_shape(t, load("cloud-api", "hetzner", "GET_v1_networks_id.json"), call("GET", "/v1/networks/%s" % nid),
                    "GET /v1/networks/{id} shape")
        key = call("POST", "/v1/ssh_keys", {"name": "fx-key", "public_key": KEY_OK}, 201)
        check_shape(t, load("cloud-api", "hetzner", "GET_v1_ssh_keys_id.json"),
                    call("GET", "/v1/ssh_keys/%s" % key.get("ssh_key", {}).get("id")), "GET /v1/ssh_keys/{id} shape")
        pg = call("POST", "/v1/placement_groups", {"name": "fx-pg", "type": "spread", "labels": {"k": "v"}}, 201)
        check_shape(t, load("cloud-api", "hetzner", "POST_v1_placement_groups.json"), pg, "POST /v1/placement_groups shape")
        srv = call("POST", "/v1/servers", {"name": "fx-s", "server_type": "cx22", "image": "debian-12",
                                           "networks": [nid], "placement_group": pg.get("placement_group", {}).get("id")}, 201)
        sid = srv.get("server", {}).get("id")
        check_shape(t, load("cloud-api", "hetzner", "GET_v1_placement_groups_id.json"),
                    call("GET", "/v1/placement_groups/%s" % pg.get("placement_group", {}).get("id")),
                    "GET /v1/placement_groups/{id} shape")
        img = call("POST", "/v1/servers/%s/actions/create_image" % sid, {"type": "snapshot", "description": "fx"}, 201)
        # The capture is a snapshot bound to a server; ours is a snapshot, so bound_to is null.
        check_shape(t, load("cloud-api", "hetzner", "GET_v1_images_id.json"),
                    call("GET", "/v1/images/%s" % img.get("image", {}).get("id")), "GET /v1/images/{id} shape")
        lb = call("POST", "/v1/load_balancers", {
            "name": "fx-lb", "load_balancer_type": "lb11", "location": "fsn1", "network": nid,
            "services": [{"protocol": "http", "listen_port": 80, "destination_port": 8080,
                          "http": {"cookie_name": "HCLBSTICKY", "cookie_lifetime": 300, "certificates": [],
                                   "redirect_http": False, "sticky_sessions": False},
                          "health_check": {"protocol": "http", "port": 8080, "interval": 15, "timeout": 10, "retries": 3,
                                           "http": {"domain": "example.com", "path": "/", "response": "",
                                                    "status_codes": ["2??"], "tls": False}}}],
            "targets": [{"type": "server", "server": {"id": sid}, "use_private_ip": True}]}, 201)
        # The hcloud-python samples differ from the API reference in places we follow the
        # reference: top-level ipv4/ipv6 and network_zone on the load balancer (the reference has
        # them under public_net and location), health check status codes as numbers (the
        # reference: strings such as "2??"), and a label_selector on a server target.
        lb_ignore = ("/load_balancer/ipv4", "/load_balancer/ipv6", "/load_balancer/network_zone",
                     "/load_balancer/services[0]/health_check/http/status_codes",
                     "/load_balancer/targets[0]/label_selector", "/load_balancer/targets[0]/targets")
        check_shape(t, load("cloud-api", "hetzner", "POST_v1_load_balancers.json"), lb, "POST /v1/load_balancers shape",
                    ignore=lb_ignore)
        check_shape(t, load("cloud-api", "hetzner", "GET_v1_load_balancers_id.json"),
                    call("GET", "/v1/load_balancers/%s" % lb.get("load_balancer", {}).get("id")),
                    "GET /v1/load_balancers/{id} shape", ignore=lb_ignore)
        check_shape(t, load("cloud-api", "hetzner", "load_balancer_type_object.json"),
                    call("GET", "/v1/load_balancer_types/1").get("load_balancer_type"), "load balancer type shape")


def test_openstack_api(t, tmp):
    # A project member does not see Nova's admin-only OS-EXT-SRV-ATTR attributes.
    admin_only = ("OS-EXT-SRV-ATTR:host", "OS-EXT-SRV-ATTR:hypervisor_hostname", "OS-EXT-SRV-ATTR:instance_name")
    with FakeCloud(os.path.join(tmp, "osapi"), extra_args=["--build-seconds", "0"]) as c:
        body = {"auth": {"identity": {"methods": ["password"], "password": {"user": {
            "name": OPENSTACK_USER["name"], "domain": {"name": OPENSTACK_USER["domain"]},
            "password": OPENSTACK_USER["password"]}}},
            "scope": {"project": {"name": OPENSTACK_USER["project"], "domain": {"name": OPENSTACK_USER["domain"]}}}}}
        st, h, tok = c.api("POST", "/v3/auth/tokens", body)
        t.eq(st, 201, "token status as captured")
        check_shape(t, load("cloud-api", "openstack", "POST_v3_auth_tokens.json"), tok, "Keystone token shape")
        st, _, ac = c.api("POST", "/v3/auth/tokens", {"auth": {"identity": {
            "methods": ["application_credential"],
            "application_credential": {"id": "appcred-demo", "secret": "appcred-secret"}}}})
        # The captured credential lists access rules; ours is unrestricted by rules.
        check_shape(t, load("cloud-api", "openstack", "POST_v3_auth_tokens.application_credential.json"), ac,
                    "application credential token shape", ignore=("access_rules",))
        H = {"X-Auth-Token": h["X-Subject-Token"]}
        nova = "/compute/v2.1"
        st, _, cr = c.api("POST", nova + "/servers", {"server": {"name": "derp", "imageRef": "img", "flavorRef": "1"}}, H)
        t.eq(st, 202, "create status as captured")
        _, _, s = c.get(nova + "/servers/" + cr["server"]["id"], H)
        check_shape(t, load("cloud-api", "openstack", "GET_servers_id.json"), s, "GET /servers/{id} shape",
                    ignore=admin_only)
        _, _, d = c.get(nova + "/servers/detail", H)
        check_shape(t, load("cloud-api", "openstack", "GET_servers_detail.json"), d, "GET /servers/detail shape",
                    ignore=admin_only)
        c.settings(nova_build_errors=[{"code": 500, "message": "boom", "details": "x"}])
        _, _, cr = c.api("POST", nova + "/servers", {"server": {"name": "bad", "imageRef": "img", "flavorRef": "1"}}, H)
        _, _, s = c.get(nova + "/servers/" + cr["server"]["id"], H)
        # The captured server failed after its port was bound; ours fails at scheduling
        # ("No valid host"), before Nova allocates any address.
        check_shape(t, load("cloud-api", "openstack", "GET_servers_id.fault.json"), s, "ERROR server with fault shape",
                    ignore=admin_only + ("/server/addresses/private",))

        # Keypairs, flavor extra specs, Glance and Neutron. Left out of the comparison: what the
        # captures carry that a project member does not get (Neutron's provider:* attributes,
        # port bindings), extensions this cloud does not enable (DNS integration), an image's
        # custom properties, and user_id in keypair list entries (Nova lists name, public_key,
        # fingerprint and type).
        _, _, kp = c.api("POST", nova + "/os-keypairs", {"keypair": {"name": "fx", "public_key": KEY_OK}},
                         dict(H, **{"OpenStack-API-Version": "compute 2.10"}))
        st, _, got = c.get(nova + "/os-keypairs/fx", H)
        t.eq(st, 200, "GET os-keypairs/{name} status")
        check_shape(t, load("cloud-api", "openstack", "GET_compute_os-keypairs_name.json"), got, "keypair shape")
        _, _, got = c.get(nova + "/os-keypairs", H)
        check_shape(t, load("cloud-api", "openstack", "GET_compute_os-keypairs.json"), got, "keypair list shape",
                    ignore=("user_id",))
        _, _, got = c.get(nova + "/flavors/4/os-extra_specs", H)
        check_shape(t, load("cloud-api", "openstack", "GET_compute_flavors_id_os-extra_specs.json"), got,
                    "flavor extra specs shape", maps=("extra_specs",))
        _, _, imgs = c.get("/image/v2/images?name=debian-12", H)
        st, _, got = c.get("/image/v2/images/" + imgs["images"][0]["id"], H)
        t.eq(st, 200, "GET image status")
        check_shape(t, load("cloud-api", "openstack", "GET_image_v2_images_id.json"), got, "Glance image shape",
                    ignore=("hw_disk_bus", "hw_disk_bus_model", "hw_scsi_model", "properties"))
        _, _, nets = c.get("/network/v2.0/networks?name=public", H)
        st, _, got = c.get("/network/v2.0/networks/" + nets["networks"][0]["id"], H)
        check_shape(t, load("cloud-api", "openstack", "GET_network_v2.0_networks_id.json"), got, "Neutron network shape",
                    ignore=("provider:segmentation_id", "provider:physical_network", "dns_domain"))
        st, _, got = c.get("/network/v2.0/subnets/" + nets["networks"][0]["subnets"][0], H)
        check_shape(t, load("cloud-api", "openstack", "GET_network_v2.0_subnets_id.json"), got, "Neutron subnet shape",
                    ignore=("dns_publish_fixed_ip",))
        _, _, ports = c.get("/network/v2.0/ports", H)
        t.ok(len(ports["ports"]) >= 1, "the servers have ports", ports)
        if ports["ports"]:
            st, _, got = c.get("/network/v2.0/ports/" + ports["ports"][0]["id"], H)
            check_shape(t, load("cloud-api", "openstack", "GET_network_v2.0_ports_id.json"), got, "Neutron port shape",
                        ignore=("binding:host_id", "binding:vif_details", "binding:vif_type", "binding:profile",
                                "dns_name", "dns_assignment"))


def xml_tree(text):
    """An XML document as nested dicts for shape_diff: element names without their namespace,
    <item> lists as lists, leaves as strings."""
    import xml.etree.ElementTree as ET

    def conv(e):
        kids = list(e)
        if not kids:
            # An empty element (<groupSet/>) is an empty set or no value: it matches anything.
            return e.text if e.text and e.text.strip() else None
        if all(k.tag.split("}")[-1] == "item" for k in kids):
            return [conv(k) for k in kids]
        return {k.tag.split("}")[-1]: conv(k) for k in kids}
    root = ET.fromstring(text)
    return {root.tag.split("}")[-1]: conv(root)}


def sigv4_headers(url, body, region, key, secret, service="ec2"):
    """Headers of a POST of a form body signed with AWS Signature Version 4 (the documented
    algorithm: canonical request, string to sign, HMAC-SHA256 key derivation)."""
    import datetime
    import hashlib
    import hmac
    u = urllib.parse.urlsplit(url)
    now = datetime.datetime.now(datetime.timezone.utc)
    amz_date, day = now.strftime("%Y%m%dT%H%M%SZ"), now.strftime("%Y%m%d")
    ctype = "application/x-www-form-urlencoded; charset=utf-8"
    payload = hashlib.sha256(body.encode()).hexdigest()
    headers = {"content-type": ctype, "host": u.netloc, "x-amz-date": amz_date}
    signed = ";".join(sorted(headers))
    canonical = "\n".join(["POST", u.path or "/", u.query, "".join("%s:%s\n" % (k, headers[k]) for k in sorted(headers)),
                           signed, payload])
    scope = "%s/%s/%s/aws4_request" % (day, region, service)
    to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(canonical.encode()).hexdigest()])
    k = ("AWS4" + secret).encode()
    for part in (day, region, service, "aws4_request"):
        k = hmac.new(k, part.encode(), hashlib.sha256).digest()
    sig = hmac.new(k, to_sign.encode(), hashlib.sha256).hexdigest()
    return {"Content-Type": ctype, "X-Amz-Date": amz_date,
            "Authorization": "AWS4-HMAC-SHA256 Credential=%s/%s, SignedHeaders=%s, Signature=%s" % (key, scope, signed,
                                                                                                   sig)}


def test_aws_api(t, tmp):
    """EC2 DescribeInstances, signed with Signature Version 4, against libcloud's
    capture. Left out: what our instances do not have (a kernel and ramdisk of paravirtual
    instances, product codes, a stopped instance's stateReason, reasons of a running one, the key
    pair of an instance launched with none)."""
    from fakecloud import AWS_ACCESS_KEY
    with FakeCloud(os.path.join(tmp, "ec2")) as c:
        inst = c.add_instance({"platform": "aws", "name": "fx-ec2"})
        body = "Action=DescribeInstances&Version=2016-11-15&InstanceId.1=" + inst["id"]
        st, _, got = c.api("POST", "/ec2/", body, sigv4_headers(c.url + "/ec2/", body, inst["region"],
                                                                AWS_ACCESS_KEY["id"], AWS_ACCESS_KEY["secret"]))
        t.eq(st, 200, "EC2 DescribeInstances status as captured")
        want = xml_tree(text("cloud-api", "aws", "DescribeInstances.xml"))
        base = "/DescribeInstancesResponse/reservationSet[0]/instancesSet[0]/"
        check_shape(t, want, xml_tree(got), "EC2 DescribeInstances shape",
                    ignore=tuple(base + k for k in ("kernelId", "ramdiskId", "productCodes", "stateReason", "reason",
                                                     "keyName")))


def test_gcp_api(t, tmp):
    """Compute Engine instances.get with the metadata server's token, against libcloud's capture."""
    with FakeCloud(os.path.join(tmp, "gce"), platform="gcp") as c:
        inst = c.instances()[0]
        st, _, tok = c.get("/computeMetadata/v1/instance/service-accounts/default/token",
                           {"Metadata-Flavor": "Google"})
        t.eq(st, 200, "a token from the metadata server")
        st, _, got = c.get("/compute/v1/projects/cloudnode-test/zones/%s/instances/%s" % (inst["zone"], inst["name"]),
                           {"Authorization": "Bearer " + tok["access_token"]})
        t.eq(st, 200, "instances.get status as captured")
        check_shape(t, load("cloud-api", "gcp", "GET_compute_v1_zones_zone_instances_name.json"), got,
                    "instances.get shape")


def test_azure_api(t, tmp):
    """Resource Manager: a VM (and its instance view), its NIC and public IP, with a managed
    identity token, against libcloud's captures. Left out: data disks (ours have none), the
    capture's resource GUIDs and DNS settings of NICs, which Resource Manager adds and nothing
    of ours reads, and the zones of a public IP of a VM in no zone."""
    with FakeCloud(os.path.join(tmp, "arm"), platform="azure") as c:
        inst = c.add_instance({"platform": "azure", "name": "fx-vm", "labels": {"role": "worker"}})
        st, _, tok = c.get("/metadata/identity/oauth2/token?api-version=2018-02-01&resource=" +
                           urllib.parse.quote(c.url + "/arm", safe=""), {"Metadata": "true"})
        t.eq(st, 200, "a managed identity token from IMDS")
        h = {"Authorization": "Bearer " + tok["access_token"]}
        _, _, subs = c.get("/arm/subscriptions?api-version=2022-12-01", h)
        rg = "/arm/subscriptions/%s/resourceGroups/cloudnode-rg/providers" % subs["value"][0]["subscriptionId"]
        st, _, vm = c.get("%s/Microsoft.Compute/virtualMachines/%s?api-version=2023-03-01&$expand=instanceView"
                          % (rg, inst["name"]), h)
        t.eq(st, 200, "VM get status")
        check_shape(t, load("cloud-api", "azure", "GET_virtualMachines_name.json"), vm, "VM shape",
                    ignore=("/properties/storageProfile/dataDisks", "/properties/storageProfile/osDisk/managedDisk/id"),
                    maps=("tags",))
        check_shape(t, load("cloud-api", "azure", "GET_virtualMachines_name_instanceView.json"),
                    vm.get("properties", {}).get("instanceView"), "VM instance view shape")
        nic_id = vm["properties"]["networkProfile"]["networkInterfaces"][0]["id"]
        st, _, nic = c.get("/arm%s?api-version=2023-05-01" % nic_id, h)
        t.eq(st, 200, "NIC get status")
        check_shape(t, load("cloud-api", "azure", "GET_networkInterfaces_name.json"), nic, "NIC shape",
                    ignore=("/properties/resourceGuid", "/properties/dnsSettings", "/tags"))
        pip_id = nic["properties"]["ipConfigurations"][0]["properties"]["publicIPAddress"]["id"]
        st, _, pip = c.get("/arm%s?api-version=2023-05-01" % pip_id, h)
        t.eq(st, 200, "public IP get status")
        check_shape(t, load("cloud-api", "azure", "GET_publicIPAddresses_name.json"), pip, "public IP shape",
                    ignore=() if inst.get("zone") else ("/zones",))


def test_digitalocean_api(t, tmp):
    """API v2 droplets list against libcloud's capture."""
    with FakeCloud(os.path.join(tmp, "do")) as c:
        c.add_instance({"platform": "digitalocean", "name": "fx-do"})
        st, _, got = c.get("/v2/droplets", {"Authorization": "Bearer " + DO_TOKEN})
        t.eq(st, 200, "droplets list status as captured")
        check_shape(t, load("cloud-api", "digitalocean", "GET_v2_droplets.json"), got, "droplets list shape")


# Clouds whose fakes have no captured API responses to be compared with: the fixtures hold
# none. A folder of them appearing must come with its comparison, so it fails until written.
UNCAPTURED_APIS = ()
UNCAPTURED_METADATA = ("digitalocean",)


def test_uncaptured(t, tmp):
    for kind, clouds in (("cloud-api", UNCAPTURED_APIS), ("metadata", UNCAPTURED_METADATA)):
        for cloud in clouds:
            name = "%s %s compared with captured responses" % (cloud, kind)
            if os.path.isdir(fx(kind, cloud)):
                t.ok(False, name, "%s has captures but this test has no comparison for them" % fx(kind, cloud))
            else:
                t.skip(name, "no captured responses in %s" % fx(kind, cloud))


def main():
    t = Tap()
    if not os.path.isdir(FIXTURES):
        t.ok(False, "fixtures folder %s present (it is part of the tree)" % FIXTURES)
        return t.done()
    with tempfile.TemporaryDirectory(prefix="cn-fake-fixtures-") as tmp:
        for fn in (test_aws, test_gcp, test_azure, test_hetzner, test_openstack, test_proxmoxve,
                   test_hetzner_api, test_hetzner_resources_api, test_openstack_api, test_aws_api, test_gcp_api,
                   test_azure_api, test_digitalocean_api, test_uncaptured):
            t.run(fn, tmp)
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
