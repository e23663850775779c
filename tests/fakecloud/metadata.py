"""Instance metadata services, one function per platform, each written from that cloud's
public documentation of paths, headers, tokens and error bodies.

Every handler takes (req, inst, sub_path) where sub_path is the request path as the instance
would see it at http://169.254.169.254 and returns a web.Response, or None for "no such
path" (the caller answers with the platform's own 404)."""
import base64
import hashlib
import ipaddress
import json
import time

from . import state as st_mod
from . import yamlout
from .web import Response, json_response, text

# -- shared tree helpers ----------------------------------------------------------------


def walk(tree, parts):
    node = tree
    for p in parts:
        if not isinstance(node, dict) or p not in node:
            return None
        node = node[p]
    return node


def listing(node):
    return "\n".join(k + "/" if isinstance(v, dict) else k for k, v in node.items())


def _split(path):
    return [p for p in path.split("/") if p]


def _user_data_bytes(inst):
    ud = inst.get("user_data")
    if ud is None:
        return None
    return ud.encode("utf-8") if isinstance(ud, str) else bytes(ud)


def _net(ip, prefix=24):
    return ipaddress.ip_network("%s/%d" % (ip, prefix), strict=False)


def _gateway(ip, prefix=24):
    return str(next(_net(ip, prefix).hosts()))


# -- AWS EC2 IMDS -----------------------------------------------------------------------

EC2_VERSIONS = ["1.0", "2007-01-19", "2007-03-01", "2007-08-29", "2007-10-10", "2007-12-15",
                "2008-02-01", "2008-09-01", "2009-04-04", "2011-01-01", "2011-05-01", "2012-01-12",
                "2014-02-25", "2014-11-05", "2015-10-20", "2016-04-19", "2016-06-30", "2016-09-02",
                "2018-03-28", "2018-08-17", "2018-09-24", "2019-10-01", "2020-10-27", "2021-01-03",
                "2021-03-23", "2021-07-15", "2022-09-24", "2023-08-23", "2024-04-11", "latest"]
# Nova's EC2-compatible service knows fewer versions.
NOVA_EC2_VERSIONS = ["1.0", "2007-01-19", "2007-03-01", "2007-08-29", "2007-10-10", "2007-12-15",
                     "2008-02-01", "2008-09-01", "2009-04-04", "latest"]

AWS_TOKEN_HEADER = "X-aws-ec2-metadata-token"
AWS_TTL_HEADER = "X-aws-ec2-metadata-token-ttl-seconds"


def _aws_html(status, title):
    body = ('<?xml version="1.0" encoding="iso-8859-1"?>\n'
            '<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.0 Transitional//EN"\n'
            '\t"http://www.w3.org/TR/xhtml1/DTD/xhtml1-transitional.dtd">\n'
            '<html xmlns="http://www.w3.org/1999/xhtml" xml:lang="en" lang="en">\n'
            ' <head>\n  <title>%d - %s</title>\n </head>\n'
            ' <body>\n  <h1>%d - %s</h1>\n </body>\n</html>\n') % (status, title, status, title)
    return text(body, status, "text/html", server="EC2ws")


def aws_error(status):
    titles = {400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found",
              405: "Method Not Allowed", 429: "Too Many Requests", 500: "Internal Server Error",
              503: "Service Unavailable"}
    return _aws_html(status, titles.get(status, "Error"))


def ec2_meta_tree(inst, nova=False):
    mac = inst["mac"]
    priv = inst.get("private_ipv4")
    pub = inst.get("public_ipv4")
    region = inst["region"]
    if nova:
        ec2_id = "i-%08x" % (int(hashlib.sha1(inst["id"].encode()).hexdigest()[:7], 16))
        public_hostname = inst["hostname"]
    else:
        ec2_id = inst["id"]
        public_hostname = ("ec2-%s.compute-1.amazonaws.com" if region == "us-east-1"
                           else "ec2-%%s.%s.compute.amazonaws.com" % region) % (pub or "").replace(".", "-")
    tree = {
        "ami-id": inst["image"] if not nova else "ami-00000001",
        "ami-launch-index": "0",
        "ami-manifest-path": "FIXME" if nova else "(unknown)",
        "block-device-mapping": ({"ami": "/dev/xvda", "root": "/dev/xvda"} if not nova
                                 else {"ami": "vda", "ebs0": "/dev/vda", "root": "/dev/vda"}),
        "hostname": inst["hostname"],
        "instance-action": "none",
        "instance-id": ec2_id,
        "instance-type": inst["type"],
        "local-hostname": inst["hostname"],
    }
    if priv:
        tree["local-ipv4"] = priv
    if not nova:
        tree["instance-life-cycle"] = "on-demand"
        tree["mac"] = mac
        cidr = str(_net(priv or "10.0.0.1", 24))
        iface = {
            "device-number": "0",
            "interface-id": "eni-%s" % hashlib.sha1(mac.encode()).hexdigest()[:17],
            "local-hostname": inst["hostname"],
            "local-ipv4s": priv or "",
            "mac": mac,
            "owner-id": "123456789012",
            "security-group-ids": "sg-0123456789abcdef0",
            "security-groups": "default",
            "subnet-id": "subnet-0123456789abcdef0",
            "subnet-ipv4-cidr-block": cidr,
            "vpc-id": "vpc-0123456789abcdef0",
            "vpc-ipv4-cidr-block": "10.0.0.0/16",
            "vpc-ipv4-cidr-blocks": "10.0.0.0/16",
        }
        if pub:
            iface["public-hostname"] = public_hostname
            iface["public-ipv4s"] = pub
        if inst.get("ipv6"):
            iface["ipv6s"] = inst["ipv6"]
            iface["subnet-ipv6-cidr-blocks"] = str(ipaddress.ip_network(inst["ipv6"] + "/64", strict=False))
            iface["vpc-ipv6-cidr-blocks"] = str(ipaddress.ip_network(inst["ipv6"] + "/56", strict=False))
        tree["network"] = {"interfaces": {"macs": {mac: dict(sorted(iface.items()))}}}
        tree["placement"] = {"availability-zone": inst["zone"],
                             "availability-zone-id": "use1-az1" if region == "us-east-1" else region[:3] + "-az1",
                             "region": region}
        tree["profile"] = "default-hvm"
        if inst.get("ipv6"):
            tree["ipv6"] = inst["ipv6"]
        tree["services"] = {"domain": "amazonaws.com", "partition": "aws"}
        if inst.get("labels"):
            tree["tags"] = {"instance": dict(inst["labels"])}
    else:
        tree["placement"] = {"availability-zone": inst["zone"]}
    if pub or nova:
        # Nova always lists both keys, empty when there is no floating IP.
        tree["public-hostname"] = public_hostname
        tree["public-ipv4"] = pub or ""
    if inst.get("ssh_keys"):
        tree["public-keys"] = {"%d=key%d" % (i, i): {"openssh-key": k} for i, k in enumerate(inst["ssh_keys"])}
    tree["reservation-id"] = "r-%s" % hashlib.sha1(inst["id"].encode()).hexdigest()[:17]
    tree["security-groups"] = "default"
    return dict(sorted(tree.items()))


def aws_identity_document(inst):
    doc = {
        "accountId": "123456789012",
        "architecture": "x86_64",
        "availabilityZone": inst["zone"],
        "billingProducts": None,
        "devpayProductCodes": None,
        "marketplaceProductCodes": None,
        "imageId": inst["image"],
        "instanceId": inst["id"],
        "instanceType": inst["type"],
        "kernelId": None,
        "pendingTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(inst["created"])),
        "privateIp": inst.get("private_ipv4"),
        "ramdiskId": None,
        "region": inst["region"],
        "version": "2017-09-30",
    }
    # IMDS pretty-prints with " : " separators.
    return json.dumps(doc, indent=2, separators=(",", " : "))


def ec2_tree_response(inst, parts, nova):
    """GET below /<version>/ for the EC2-style trees (AWS and Nova's EC2 compatibility)."""
    server = None if nova else "EC2ws"
    ud = _user_data_bytes(inst)
    if not parts:
        names = ["dynamic", "meta-data"] if not nova else ["meta-data"]
        if ud is not None:
            names.append("user-data")
        return text("\n".join(names), server=server)
    head, rest = parts[0], parts[1:]
    if head == "user-data" and not rest:
        if ud is None:
            return None
        return Response(200, ud, "application/octet-stream", server=server)
    if head == "meta-data":
        tree = ec2_meta_tree(inst, nova)
    elif head == "dynamic" and not nova:
        tree = {"instance-identity": {"document": aws_identity_document(inst)}}
    else:
        return None
    node = walk(tree, rest)
    if node is None:
        return None
    if isinstance(node, dict):
        return text(listing(node), server=server)
    return text(node, server=server)


def aws(req, inst, path):
    parts = _split(path)
    if path == "/":
        if req.method not in ("GET", "HEAD"):
            return aws_error(405)
        return text("\n".join(EC2_VERSIONS), server="EC2ws")
    if parts[0] not in EC2_VERSIONS:
        return None
    state = req.state
    if parts[1:] == ["api", "token"]:
        if parts[0] != "latest":
            return None
        if req.method != "PUT":
            return aws_error(405).add("Allow", "OPTIONS, PUT")
        # The documented protection against open proxies: a token request that went through
        # one is refused.
        if req.header("X-Forwarded-For") is not None:
            return aws_error(403)
        ttl = req.header(AWS_TTL_HEADER)
        try:
            ttl_n = int(ttl)
        except (TypeError, ValueError):
            return aws_error(400)
        if not 1 <= ttl_n <= 21600:
            return aws_error(400)
        token = state.sign("imds", {"i": inst["id"]}, ttl_n)
        return text(token, server="EC2ws", headers=[(AWS_TTL_HEADER, str(ttl_n))])
    if req.method not in ("GET", "HEAD"):
        return aws_error(405)
    token = req.header(AWS_TOKEN_HEADER)
    extra = []
    if token is not None:
        payload = state.verify("imds", token)
        # A token is bound to the instance it was issued for; invalid or expired is 401
        # whether or not tokens are required.
        if payload is None or payload.get("i") != inst["id"]:
            return aws_error(401)
        extra.append((AWS_TTL_HEADER, str(max(0, int(payload["exp"] - time.time())))))
    elif inst.get("require_token"):
        return aws_error(401)
    role = (inst.get("extra") or {}).get("iam_role")
    if parts[1:4] == ["meta-data", "iam", "security-credentials"] and role:
        from .aws_ec2 import role_credentials
        if len(parts) == 4:
            return text(role, server="EC2ws")
        if parts[4:] == [role]:
            return text(json.dumps(role_credentials(state, inst), indent=2), server="EC2ws")
        return None
    resp = ec2_tree_response(inst, parts[1:], nova=False)
    if resp is not None:
        resp.headers.extend(extra)
    return resp


# -- OpenStack (Nova metadata service) --------------------------------------------------

OPENSTACK_VERSIONS = ["2012-08-10", "2013-04-04", "2013-10-17", "2015-10-15", "2016-06-30",
                      "2016-10-06", "2017-02-22", "2018-08-27", "2020-10-14", "latest"]


def openstack_meta_data(inst):
    keys = inst.get("ssh_keys") or []
    doc = {
        "uuid": inst["id"],
        "meta": dict(inst.get("labels") or {}),
        "hostname": inst["hostname"],
        "name": inst["name"],
        "launch_index": 0,
        "availability_zone": inst["zone"],
        "random_seed": base64.b64encode(hashlib.sha512(inst["id"].encode()).digest()).decode(),
        "project_id": inst.get("project_id") or "p-demo",
        "devices": [],
        "dedicated_cpus": [],
    }
    if keys:
        doc["public_keys"] = {"key%d" % i: k for i, k in enumerate(keys)}
        doc["keys"] = [{"name": "key%d" % i, "type": "ssh", "data": k} for i, k in enumerate(keys)]
    return doc


def openstack_network_data(inst):
    mac = inst["mac"]
    tap = "tap" + hashlib.sha1(mac.encode()).hexdigest()[:11]
    vif = str(hashlib.sha1(("vif" + inst["id"]).encode()).hexdigest())
    vif = "%s-%s-%s-%s-%s" % (vif[:8], vif[8:12], vif[12:16], vif[16:20], vif[20:32])
    links = [{"id": tap, "vif_id": vif, "type": "ovs", "mtu": 1450, "ethernet_mac_address": mac}]
    networks = []
    if inst.get("private_ipv4"):
        ip = inst["private_ipv4"]
        networks.append({"id": "network0", "type": "ipv4", "link": tap, "ip_address": ip,
                         "netmask": "255.255.255.0",
                         "routes": [{"network": "0.0.0.0", "netmask": "0.0.0.0", "gateway": _gateway(ip)}],
                         "network_id": "da5bb487-5193-4a65-a3df-4a0055a8c0d7",
                         "services": []})
    if inst.get("ipv6"):
        networks.append({"id": "network1", "type": "ipv6", "link": tap, "ip_address": inst["ipv6"],
                         "netmask": "ffff:ffff:ffff:ffff::",
                         "routes": [{"network": "::", "netmask": "::", "gateway": _gateway(inst["ipv6"], 64)}],
                         "network_id": "da5bb487-5193-4a65-a3df-4a0055a8c0d7",
                         "services": []})
    return {"links": links, "networks": networks,
            "services": [{"type": "dns", "address": "192.0.2.53"}]}


def openstack_files(inst):
    """The openstack/<version>/ documents, shared by the HTTP service and the config drive."""
    files = {
        "meta_data.json": json.dumps(openstack_meta_data(inst)),
        "network_data.json": json.dumps(openstack_network_data(inst)),
        "vendor_data.json": json.dumps(inst.get("vendor_data") or {}),
        "vendor_data2.json": json.dumps({}),
    }
    ud = _user_data_bytes(inst)
    if ud is not None:
        files["user_data"] = ud
    return files


def openstack(req, inst, path):
    parts = _split(path)
    if req.method not in ("GET", "HEAD"):
        return text("405 Method Not Allowed\n\nThe method is not allowed for the requested URL.\n\n", 405)
    if not parts:
        return text("\n".join(NOVA_EC2_VERSIONS + ["openstack"]))
    if parts[0] == "openstack":
        if len(parts) == 1:
            return text("\n".join(OPENSTACK_VERSIONS))
        if parts[1] not in OPENSTACK_VERSIONS:
            return None
        files = openstack_files(inst)
        if parts[1] != "latest" and parts[1] < "2015-10-15":
            files.pop("network_data.json")
        if parts[1] != "latest" and parts[1] < "2016-10-06":
            files.pop("vendor_data2.json")
        if len(parts) == 2:
            return text("\n".join(sorted(files)))
        if len(parts) == 3 and parts[2] in files:
            body = files[parts[2]]
            ctype = "application/json" if parts[2].endswith(".json") else "text/plain"
            return Response(200, body, ctype)
        return None
    if parts[0] in NOVA_EC2_VERSIONS:
        return ec2_tree_response(inst, parts[1:], nova=True)
    return None


# -- Hetzner Cloud ----------------------------------------------------------------------


def hetzner_private_networks(inst):
    if not inst.get("private_ipv4"):
        return []
    ip = inst["private_ipv4"]
    return [{
        "ip": ip,
        "alias_ips": [],
        "interface_num": 1,
        "mac_address": "86:00:00:%s" % inst["mac"][9:],
        "network_id": inst.get("network_id") or 4711,
        "network_name": "cloudnode",
        "network": "10.0.0.0/16",
        "subnet": str(_net(ip, 24)),
        "gateway": "10.0.0.1",
    }]


def hetzner_network_config(inst):
    subnets = [{"type": "dhcp", "ipv4": True}]
    if inst.get("ipv6"):
        subnets.append({"type": "static", "address": inst["ipv6"] + "/64", "ipv6": True,
                        "gateway": "fe80::1",
                        "dns_nameservers": ["2a01:4ff:ff00::add:2", "2a01:4ff:ff00::add:1"]})
    return {"version": 1, "config": [{"type": "physical", "name": "eth0",
                                      "mac_address": inst["mac"], "subnets": subnets}]}


def hetzner_metadata(inst):
    return {
        "availability-zone": inst["zone"],
        "hostname": inst["hostname"],
        "instance-id": int(inst["id"]) if inst["id"].isdigit() else inst["id"],
        # The real service leaves local-ipv4 empty; private addresses are listed under
        # private-networks.
        "local-ipv4": "",
        "network-config": hetzner_network_config(inst),
        "public-ipv4": inst.get("public_ipv4") or "",
        "public-keys": list(inst.get("ssh_keys") or []),
        "region": inst["region"],
        "vendor_data": inst.get("vendor_data") or "",
    }


def hetzner(req, inst, path):
    parts = _split(path)
    if req.method not in ("GET", "HEAD"):
        return text("method not allowed", 405)
    if parts[:2] != ["hetzner", "v1"]:
        return None
    rest = parts[2:]
    if rest == ["userdata"]:
        ud = _user_data_bytes(inst)
        return Response(200, ud if ud is not None else b"", "text/plain")
    if not rest or rest[0] != "metadata":
        return None
    md = hetzner_metadata(inst)
    if rest == ["metadata"]:
        return text(yamlout.dump(md), content_type="text/yaml")
    if rest == ["metadata", "private-networks"]:
        return text(yamlout.dump(hetzner_private_networks(inst)), content_type="text/yaml")
    if len(rest) == 2 and rest[1] in md:
        v = md[rest[1]]
        if isinstance(v, (dict, list)):
            return text(yamlout.dump(v), content_type="text/yaml")
        return text(str(v))
    return None


# -- Google Compute Engine --------------------------------------------------------------

GCP_PROJECT = "cloudnode-test"
GCP_PROJECT_NUMBER = "123456789012"


def _gcp_service_account(inst):
    """The instance's default service account (extra.gcp_service_account: null for none)."""
    return (inst.get("extra") or {}).get("gcp_service_account",
                                         "%s-compute@developer.gserviceaccount.com" % GCP_PROJECT_NUMBER)


def gcp_tree(inst):
    attrs = {k: v for k, v in (inst.get("labels") or {}).items()}
    ud = _user_data_bytes(inst)
    if ud is not None:
        attrs["user-data"] = ud.decode("utf-8", "replace")
    if inst.get("ssh_keys"):
        attrs["ssh-keys"] = "\n".join("core:" + k for k in inst["ssh_keys"])
    nic = {
        "access-configs": {},
        "dns-servers": "169.254.169.254",
        "forwarded-ips": {},
        "gateway": _gateway(inst["private_ipv4"]) if inst.get("private_ipv4") else "",
        "ip": inst.get("private_ipv4") or "",
        "ip-aliases": {},
        "mac": inst["mac"],
        "mtu": "1460",
        "network": "projects/%s/networks/default" % GCP_PROJECT_NUMBER,
        "subnetmask": "255.255.240.0",
        "target-instance-ips": {},
    }
    if inst.get("public_ipv4"):
        nic["access-configs"] = {"0": {"external-ip": inst["public_ipv4"], "type": "ONE_TO_ONE_NAT"}}
    if inst.get("ipv6"):
        nic["ipv6s"] = inst["ipv6"]
    return {
        "instance": {
            "attributes": attrs,
            "cpu-platform": "Intel Broadwell",
            "description": "",
            "disks": {"0": {"device-name": "persistent-disk-0", "index": "0", "interface": "SCSI",
                            "mode": "READ_WRITE", "type": "PERSISTENT-BALANCED"}},
            "hostname": inst["hostname"],
            "id": inst["id"],
            "image": "projects/debian-cloud/global/images/%s" % inst["image"],
            "machine-type": "projects/%s/machineTypes/%s" % (GCP_PROJECT_NUMBER, inst["type"]),
            "maintenance-event": "NONE",
            "name": inst["name"],
            "network-interfaces": {"0": nic},
            "preempted": "FALSE",
            "scheduling": {"automatic-restart": "TRUE", "on-host-maintenance": "MIGRATE", "preemptible": "FALSE"},
            "service-accounts": ({} if not _gcp_service_account(inst) else {
                name: {"aliases": "default", "email": _gcp_service_account(inst),
                       "scopes": "https://www.googleapis.com/auth/cloud-platform\n"}
                for name in ("default", _gcp_service_account(inst))}),
            "tags": json.dumps(sorted(inst.get("labels") or {})),
            "zone": "projects/%s/zones/%s" % (GCP_PROJECT_NUMBER, inst["zone"]),
        },
        "project": {
            "attributes": {},
            "numeric-project-id": GCP_PROJECT_NUMBER,
            "project-id": GCP_PROJECT,
        },
    }


def _camel(k):
    head, *tail = k.split("-")
    return head + "".join(t[:1].upper() + t[1:] for t in tail)


def gcp_json(node, under_attributes=False):
    """The recursive JSON form: hyphenated names become camelCase, numbered directories become
    arrays, custom attribute names are kept as written."""
    if not isinstance(node, dict):
        if node in ("TRUE", "FALSE") and not under_attributes:
            return node == "TRUE"
        return node
    if node and all(k.isdigit() for k in node):
        return [gcp_json(node[k]) for k in sorted(node, key=int)]
    out = {}
    for k, v in node.items():
        if k == "tags" and isinstance(v, str):
            out[k] = json.loads(v)
            continue
        name = k if under_attributes else _camel(k)
        out[name] = gcp_json(v, under_attributes=(k == "attributes"))
    return out


def _gcp_html(status, what, path):
    body = ("<!DOCTYPE html>\n<html lang=en>\n  <meta charset=utf-8>\n"
            "  <title>Error %d (%s)!!1</title>\n"
            "  <p><b>%d.</b> <ins>That\u2019s an error.</ins>\n"
            "  <p>%s <ins>That\u2019s all we know.</ins>\n") % (status, what, status, path)
    return text(body, status, "text/html; charset=UTF-8", server="Metadata Server for VM",
                headers=[("Metadata-Flavor", "Google")])


def gcp(req, inst, path):
    def done(resp):
        if resp is not None:
            resp.server = "Metadata Server for VM"
            resp.add("Metadata-Flavor", "Google")
        return resp

    if req.header("X-Forwarded-For") is not None:
        return _gcp_html(403, "Forbidden", "Your client does not have permission to get URL "
                         "<code>%s</code> from this server. Request had a X-Forwarded-For header." % path)
    # v1 takes only the documented header and value (the X-Google-Metadata-Request header
    # belonged to the retired v1beta1 endpoint).
    if req.header("Metadata-Flavor") != "Google":
        return _gcp_html(403, "Forbidden", "Your client does not have permission to get URL "
                         "<code>%s</code> from this server. Missing Metadata-Flavor:Google header." % path)
    if req.method not in ("GET", "HEAD"):
        return _gcp_html(405, "Method Not Allowed", "The request method %s is inappropriate for the URL "
                         "<code>%s</code>." % (req.method, path))
    parts = _split(path)
    if not parts:
        return done(text("computeMetadata/\n", content_type="application/text"))
    if parts[0] != "computeMetadata":
        return None
    if len(parts) == 1:
        return done(text("v1/\n", content_type="application/text"))
    if parts[1] != "v1":
        return None
    if parts[2:] in (["instance", "service-accounts", "default", "token"],
                     ["instance", "service-accounts", _gcp_service_account(inst), "token"]):
        from . import gcp as gcp_api
        if not _gcp_service_account(inst):
            return None
        return done(json_response(gcp_api.issue_token(req.state, _gcp_service_account(inst))))
    tree = gcp_tree(inst)
    node = walk(tree, parts[2:])
    if node is None:
        return None
    recursive = req.query.get("recursive", "").lower() == "true"
    alt = req.query.get("alt") or ("json" if recursive and isinstance(node, dict) else "text")
    if isinstance(node, dict) and not path.endswith("/"):
        q = ("?" + req.query_string) if req.query_string else ""
        loc = req.base_url.rstrip("/") + path + "/" + q
        return done(Response(301, "", "text/html", headers=[("Location", loc)]))
    if alt not in ("json", "text"):
        return done(text("Invalid value for alt: %s" % alt, 400, content_type="text/html"))
    under_attrs = len(parts) >= 4 and parts[3] == "attributes"
    if isinstance(node, dict):
        if recursive:
            if alt == "json":
                return done(json_response(gcp_json(node, under_attrs)))
            return done(text("\n".join("%s %s" % kv for kv in _gcp_flat(node, "")), content_type="application/text"))
        if alt == "json":
            return done(json_response([k + "/" if isinstance(v, dict) else k for k, v in node.items()]))
        return done(text(listing(node) + "\n", content_type="application/text"))
    if alt == "json":
        return done(json_response(gcp_json(node, under_attrs)))
    return done(text(node, content_type="application/text"))


def _gcp_flat(node, prefix):
    for k, v in node.items():
        if isinstance(v, dict):
            yield from _gcp_flat(v, prefix + k + "/")
        else:
            yield prefix + k, v


# -- Azure IMDS -------------------------------------------------------------------------

AZURE_API_VERSIONS = ["2017-03-01", "2017-04-02", "2017-08-01", "2017-10-01", "2017-12-01",
                      "2018-02-01", "2018-04-02", "2018-10-01", "2019-02-01", "2019-03-11",
                      "2019-04-30", "2019-06-01", "2019-06-04", "2019-08-01", "2019-08-15",
                      "2019-11-01", "2020-06-01", "2020-07-15", "2020-09-01", "2020-10-01",
                      "2020-12-01", "2021-01-01", "2021-02-01", "2021-03-01", "2021-05-01",
                      "2021-10-01", "2021-11-01", "2021-11-15", "2021-12-13", "2022-02-01",
                      "2022-03-01", "2022-07-01", "2022-08-01", "2023-07-01"]
AZURE_SUBSCRIPTION = "8d10da13-8125-4ba9-a717-bf7490507b3d"


def _azure_err(status, message, versions=False):
    body = {"error": message}
    if versions:
        body["newest-versions"] = list(reversed(AZURE_API_VERSIONS[-3:]))
    return json_response(body, status, "application/json; charset=utf-8")


def azure_instance(inst):
    labels = inst.get("labels") or {}
    rg = "cloudnode-rg"
    ud = _user_data_bytes(inst)
    net = {"interface": [{
        "ipv4": {
            "ipAddress": [{"privateIpAddress": inst.get("private_ipv4") or "",
                           "publicIpAddress": inst.get("public_ipv4") or ""}],
            "subnet": [{"address": str(_net(inst.get("private_ipv4") or "10.0.0.4").network_address),
                        "prefix": "24"}],
        },
        "ipv6": {"ipAddress": ([{"privateIpAddress": inst["ipv6"]}] if inst.get("ipv6") else [])},
        "macAddress": inst["mac"].replace(":", "").upper(),
    }]}
    compute = {
        "azEnvironment": "AzurePublicCloud",
        "isHostCompatibilityLayerVm": "false",
        "licenseType": "",
        "location": inst["region"],
        "name": inst["name"],
        "offer": "debian-12",
        "osProfile": {"adminUsername": "azureuser", "computerName": inst["hostname"],
                      "disablePasswordAuthentication": "true"},
        "osType": "Linux",
        "placementGroupId": "",
        "plan": {"name": "", "product": "", "publisher": ""},
        "platformFaultDomain": "0",
        "platformUpdateDomain": "0",
        "priority": "",
        "provider": "Microsoft.Compute",
        "publicKeys": [{"keyData": k, "path": "/home/azureuser/.ssh/authorized_keys"}
                       for k in inst.get("ssh_keys") or []],
        "publisher": "Debian",
        "resourceGroupName": rg,
        "resourceId": "/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Compute/virtualMachines/%s"
                      % (AZURE_SUBSCRIPTION, rg, inst["name"]),
        "securityProfile": {"secureBootEnabled": "false", "virtualTpmEnabled": "false"},
        "sku": "12",
        "subscriptionId": AZURE_SUBSCRIPTION,
        "tags": ";".join("%s:%s" % kv for kv in labels.items()),
        "tagsList": [{"name": k, "value": v} for k, v in labels.items()],
        "userData": base64.b64encode(ud).decode() if ud is not None else "",
        "version": "0.20240101.1",
        "vmId": inst["id"],
        "vmScaleSetName": "",
        "vmSize": inst["type"],
        "zone": inst["zone"],
    }
    return {"compute": compute, "network": net}


def _azure_walk(node, parts):
    for p in parts:
        if isinstance(node, dict) and p in node:
            node = node[p]
        elif isinstance(node, list) and p.isdigit() and int(p) < len(node):
            node = node[int(p)]
        else:
            return None
    return node


def _azure_throttled(state, inst):
    rate = float(state.read()["settings"].get("azure_imds_requests_per_second") or 0)
    if rate <= 0:
        return False
    with state.locked() as st:
        remaining, _ = st_mod.take_token(st, "azure:" + inst["id"], max(1, int(rate)), rate, time.time())
    return remaining < 0


def azure(req, inst, path):
    parts = _split(path)
    if not parts or parts[0] != "metadata":
        return None
    if req.header("X-Forwarded-For") is not None:
        return _azure_err(400, "Bad request. X-Forwarded-For header is not allowed.")
    if (req.header("Metadata") or "").lower() != "true":
        return _azure_err(400, "Bad request. Required metadata header not specified")
    if req.method not in ("GET", "HEAD"):
        return _azure_err(405, "Method not allowed")
    if _azure_throttled(req.state, inst):
        return _azure_err(429, "Too many requests")
    if parts == ["metadata", "identity", "oauth2", "token"]:
        from . import azure as azure_api
        return azure_api.imds_token(req, inst)
    if parts == ["metadata", "versions"]:
        return json_response({"apiVersions": AZURE_API_VERSIONS}, content_type="application/json; charset=utf-8")
    if len(parts) < 2 or parts[1] != "instance":
        return None
    version = req.query.get("api-version")
    if not version:
        return _azure_err(400, "Bad request. api-version was not specified in the request. "
                          "For more information refer to aka.ms/azureimds", versions=True)
    if version not in AZURE_API_VERSIONS:
        return _azure_err(400, "Bad request. api-version is invalid or was not specified in the request. "
                          "For more information refer to aka.ms/azureimds", versions=True)
    node = _azure_walk(azure_instance(inst), parts[2:])
    if node is None:
        return None
    fmt = req.query.get("format", "json")
    if fmt == "text":
        if isinstance(node, (dict, list)):
            return _azure_err(400, "Bad request. Querying non-leaf nodes with format=text is not supported.")
        return text(str(node), content_type="text/plain; charset=utf-8")
    if fmt != "json":
        return _azure_err(400, "Bad request. Format %s is not supported." % fmt)
    if not isinstance(node, (dict, list)):
        # IMDS documents that format=json does not work for leaf nodes; text must be asked for.
        return _azure_err(400, "Bad request. Querying leaf nodes requires format=text.")
    return json_response(node, content_type="application/json; charset=utf-8")


def azure_not_found():
    return _azure_err(404, "Not found")


# -- DigitalOcean -----------------------------------------------------------------------


def digitalocean_doc(inst):
    ud = _user_data_bytes(inst)
    public = {"mac": inst["mac"], "type": "public"}
    if inst.get("public_ipv4"):
        ip = inst["public_ipv4"]
        public["ipv4"] = {"ip_address": ip, "netmask": "255.255.255.0", "gateway": _gateway(ip)}
        public["anchor_ipv4"] = {"ip_address": "10.20.0.%d" % (int(ip.split(".")[-1]) % 250 + 2),
                                 "netmask": "255.255.0.0", "gateway": "10.20.0.1"}
    if inst.get("ipv6"):
        public["ipv6"] = {"ip_address": inst["ipv6"].upper(), "cidr": 64, "gateway": _gateway(inst["ipv6"], 64).upper()}
    ifaces = {"public": [public]}
    if inst.get("private_ipv4"):
        ip = inst["private_ipv4"]
        ifaces["private"] = [{"ipv4": {"ip_address": ip, "netmask": "255.255.0.0", "gateway": "0.0.0.0"},
                              "mac": "06:" + inst["mac"][3:], "type": "private"}]
    return {
        "droplet_id": int(inst["id"]) if inst["id"].isdigit() else inst["id"],
        "hostname": inst["hostname"],
        "user_data": ud.decode("utf-8", "replace") if ud is not None else None,
        "vendor_data": inst.get("vendor_data") or "#cloud-config\n",
        "public_keys": list(inst.get("ssh_keys") or []),
        "auth_key": hashlib.sha1(inst["id"].encode()).hexdigest(),
        "region": inst["region"],
        "interfaces": ifaces,
        "floating_ip": {"ipv4": {"active": False}},
        "reserved_ip": {"ipv4": {"active": False}, "ipv6": {"active": False}},
        "dns": {"nameservers": ["67.207.67.2", "67.207.67.3"]},
        "tags": sorted(inst.get("labels") or {}),
        "features": {"dhcp_enabled": False},
    }


def _do_iface_tree(iface):
    t = {"mac": iface["mac"], "type": iface["type"]}
    if "ipv4" in iface:
        t["ipv4"] = {"address": iface["ipv4"]["ip_address"], "netmask": iface["ipv4"]["netmask"],
                     "gateway": iface["ipv4"]["gateway"]}
    if "anchor_ipv4" in iface:
        a = iface["anchor_ipv4"]
        t["anchor_ipv4"] = {"address": a["ip_address"], "netmask": a["netmask"], "gateway": a["gateway"]}
    if "ipv6" in iface:
        t["ipv6"] = {"address": iface["ipv6"]["ip_address"], "cidr": str(iface["ipv6"]["cidr"]),
                     "gateway": iface["ipv6"]["gateway"]}
    return t


def digitalocean_tree(inst):
    doc = digitalocean_doc(inst)
    tree = {"id": str(doc["droplet_id"]), "hostname": doc["hostname"]}
    if doc["user_data"] is not None:
        tree["user-data"] = doc["user_data"]
    tree["vendor-data"] = doc["vendor_data"]
    tree["public-keys"] = "\n".join(doc["public_keys"])
    tree["region"] = doc["region"]
    tree["interfaces"] = {kind: {str(i): _do_iface_tree(x) for i, x in enumerate(lst)}
                          for kind, lst in doc["interfaces"].items()}
    tree["dns"] = {"nameservers": "\n".join(doc["dns"]["nameservers"])}
    tree["floating_ip"] = {"ipv4": {"active": "false"}}
    tree["tags"] = {t: t for t in doc["tags"]}
    tree["features"] = {"dhcp_enabled": "false"}
    return tree


def digitalocean(req, inst, path):
    if req.method not in ("GET", "HEAD"):
        return text("method not allowed\n", 405)
    if path == "/metadata/v1.json":
        return json_response(digitalocean_doc(inst))
    parts = _split(path)
    if parts[:2] != ["metadata", "v1"]:
        return None
    node = walk(digitalocean_tree(inst), parts[2:])
    if node is None:
        return None
    if isinstance(node, dict):
        if parts[2:3] == ["tags"]:
            return text("\n".join(node))
        return text(listing(node))
    return text(node)


HANDLERS = {
    "aws": aws,
    "openstack": openstack,
    "hetzner": hetzner,
    "gcp": gcp,
    "azure": azure,
    "digitalocean": digitalocean,
}


def not_found(platform, req, path):
    if platform == "aws":
        return aws_error(404)
    if platform == "gcp":
        return _gcp_html(404, "Not Found", "The requested URL <code>%s</code> was not found on this server." % path)
    if platform == "azure":
        return azure_not_found()
    if platform == "openstack":
        return text("404 Not Found\n\nThe resource could not be found.\n\n", 404)
    return text("404 page not found\n", 404)


def serve(req, inst, path):
    handler = HANDLERS.get(inst["platform"])
    resp = handler(req, inst, path) if handler else None
    if resp is None:
        resp = not_found(inst["platform"], req, path)
    return resp
