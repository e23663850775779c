"""OpenStack Glance v2 (/image) and Neutron v2.0 (/network), as the Keystone catalog publishes them
and as openstackclient and gophercloud use them: version discovery documents, the image catalog
(list with name/visibility/status filters, limit and marker; show), networks and subnets (list,
show, create, delete), floating IPs on the external network (list with filters, create,
associate with a server's port and dissociate by PUT, delete), the ports Nova's servers have (derived from the instances: one port per
server on its network), the default security group, and the extension list. Every call needs an
X-Auth-Token issued by the fake Keystone.

Neutron state lives in state["neutron"]; the networks "private" (10.0.0.0/16 and 2001:db8::/32,
the ranges the fake gives instances) and "public" (external) exist from the start."""
import hashlib
import ipaddress
import time
import uuid

from . import state as st_mod
from .web import Response, iso8601z, json_response

CREATED = 1704067200.0
NS = uuid.UUID("6f1c0c0e-5a0b-4c59-9b8e-0c1f2d3e4a5b")


def _id(*parts):
    return str(uuid.uuid5(NS, "/".join(parts)))


PRIVATE_NET = _id("network", "private")
PUBLIC_NET = _id("network", "public")
IMAGES = [
    # name, os_distro, os_version, size in bytes, min_disk
    ("cirros-0.6.2-x86_64-disk", "cirros", "0.6.2", 21430272, 1),
    ("ubuntu-22.04", "ubuntu", "22.04", 667287552, 10),
    ("ubuntu-24.04", "ubuntu", "24.04", 600244224, 10),
    ("debian-12", "debian", "12", 353435648, 4),
    ("flatcar-stable", "flatcar", "4081.2.0", 497549312, 10),
]


def image_id(name):
    return _id("image", name)


def _image(name, distro, version, size, min_disk, base):
    iid = image_id(name)
    h = hashlib.sha512(name.encode()).hexdigest()
    return {"id": iid, "name": name, "status": "active", "visibility": "public", "protected": False,
            "os_hidden": False, "owner": "f0a43b1c2d3e4f5a6b7c8d9e0f1a2b3c", "tags": [],
            "container_format": "bare", "disk_format": "qcow2", "size": size, "virtual_size": size * 4,
            "min_disk": min_disk, "min_ram": 0, "checksum": hashlib.md5(name.encode()).hexdigest(),
            "os_hash_algo": "sha512", "os_hash_value": h, "os_distro": distro, "os_version": version,
            "hw_architecture": "x86_64", "created_at": iso8601z(CREATED), "updated_at": iso8601z(CREATED),
            "self": "/v2/images/" + iid, "file": "/v2/images/%s/file" % iid, "schema": "/v2/schemas/image",
            "direct_url": None, "locations": []}


def token_project(state, req):
    tok = state.verify("keystone", req.header("X-Auth-Token"))
    return tok.get("p") if tok else None


def unauthorized():
    return json_response({"error": {"code": 401, "title": "Unauthorized",
                                    "message": "The request you have made requires authentication."}}, 401)


class Glance:
    def __init__(self, state):
        self.state = state

    def handle(self, req):
        parts = [p for p in req.path.split("/") if p][1:]
        base = req.base_url + "/image"
        if not parts or parts == ["versions"]:
            return json_response({"versions": [
                {"id": "v2.%d" % n, "status": "CURRENT" if n == 16 else "SUPPORTED",
                 "links": [{"rel": "self", "href": base + "/v2/"}]} for n in (16, 15, 9)]},
                300 if not parts else 200)
        if token_project(self.state, req) is None:
            return unauthorized()
        if parts[0] != "v2":
            return self.error(404, "The resource could not be found.")
        parts = parts[1:]
        images = [_image(*i, base) for i in IMAGES]
        if parts == ["images"] and req.method == "GET":
            return self.list(req, images)
        if len(parts) == 2 and parts[0] == "images" and req.method == "GET":
            img = next((i for i in images if i["id"] == parts[1]), None)
            if img is None:
                return self.error(404, "No image found with ID %s" % parts[1])
            return json_response(img)
        if len(parts) == 2 and parts[0] == "schemas":
            return json_response({"name": parts[1], "properties": {}, "additionalProperties": {"type": "string"}})
        if parts[:1] == ["images"] and req.method in ("POST", "PATCH", "PUT", "DELETE"):
            return self.error(403, "You are not authorized to change the public image catalog.")
        return self.error(404, "The resource could not be found.")

    @staticmethod
    def error(status, message):
        title = {403: "Forbidden", 404: "Not Found", 400: "Bad Request"}.get(status, "Error")
        return Response(status, "<html><head><title>%d %s</title></head><body><h1>%d %s</h1>%s<br /><br />"
                        "</body></html>" % (status, title, status, title, message), "text/html; charset=UTF-8")

    def list(self, req, images):
        q = req.query
        for key in ("name", "status", "visibility", "os_distro", "container_format", "disk_format"):
            if key in q:
                images = [i for i in images if str(i.get(key)) == q[key]]
        if q.get("id"):
            images = [i for i in images if i["id"] == q["id"].removeprefix("in:")]
        images.sort(key=lambda i: (i["created_at"], i["id"]), reverse=True)
        if q.get("marker"):
            ids = [i["id"] for i in images]
            if q["marker"] not in ids:
                return self.error(400, "marker not found")
            images = images[ids.index(q["marker"]) + 1:]
        body = {"schema": "/v2/schemas/images", "first": "/v2/images"}
        if q.get("limit"):
            try:
                limit = int(q["limit"])
            except ValueError:
                return self.error(400, "limit param must be an integer")
            if len(images) > limit:
                images = images[:limit]
                body["next"] = "/v2/images?marker=%s&limit=%d" % (images[-1]["id"], limit)
        body["images"] = images
        return json_response(body)


def empty():
    now = iso8601z(CREATED)
    return {
        "networks": {
            PRIVATE_NET: {"id": PRIVATE_NET, "name": "private", "router:external": False, "shared": False,
                          "created_at": now},
            PUBLIC_NET: {"id": PUBLIC_NET, "name": "public", "router:external": True, "shared": True,
                         "created_at": now},
        },
        "subnets": {
            _id("subnet", "private-v4"): {"id": _id("subnet", "private-v4"), "name": "private-subnet",
                                          "network_id": PRIVATE_NET, "cidr": "10.0.0.0/16", "ip_version": 4,
                                          "gateway_ip": "10.0.0.1", "enable_dhcp": True, "created_at": now},
            _id("subnet", "private-v6"): {"id": _id("subnet", "private-v6"), "name": "ipv6-private-subnet",
                                          "network_id": PRIVATE_NET, "cidr": "2001:db8::/32", "ip_version": 6,
                                          "gateway_ip": "2001:db8::1", "enable_dhcp": True, "created_at": now},
            _id("subnet", "public-v4"): {"id": _id("subnet", "public-v4"), "name": "public-subnet",
                                         "network_id": PUBLIC_NET, "cidr": "203.0.113.0/24", "ip_version": 4,
                                         "gateway_ip": "203.0.113.1", "enable_dhcp": False, "created_at": now},
        },
    }


def neutron_read(st):
    return st.get("neutron") or empty()


def neutron_write(st):
    if "neutron" not in st:
        st["neutron"] = empty()
    return st["neutron"]


def network_names(st):
    """Neutron network id -> name, for Nova's addresses."""
    return {n["id"]: n["name"] for n in neutron_read(st)["networks"].values()}


class Neutron:
    def __init__(self, state):
        self.state = state

    @staticmethod
    def error(status, kind, message):
        return json_response({"NeutronError": {"type": kind, "message": message, "detail": ""}}, status)

    def handle(self, req):
        parts = [p for p in req.path.split("/") if p][1:]
        base = req.base_url + "/network"
        if not parts:
            return json_response({"versions": [{"id": "v2.0", "status": "CURRENT",
                                                "links": [{"rel": "self", "href": base + "/v2.0/"}]}]})
        project = token_project(self.state, req)
        if project is None:
            return unauthorized()
        if parts[0] != "v2.0":
            return self.error(404, "HTTPNotFound", "The resource could not be found.")
        parts = [p.removesuffix(".json") for p in parts[1:]]
        m = req.method
        if parts == ["extensions"] and m == "GET":
            return json_response({"extensions": [
                {"alias": a, "name": n, "description": n, "updated": "2013-01-20T00:00:00-00:00", "links": []}
                for a, n in (("security-group", "security-group"), ("external-net", "Neutron external network"),
                             ("standard-attr-description", "standard-attr-description"),
                             ("standard-attr-timestamp", "Resource timestamps"), ("port-security", "Port Security"),
                             ("router", "Neutron L3 Router"))]})
        table = parts[0] if parts else ""
        if table in ("networks", "subnets"):
            if len(parts) == 1 and m == "GET":
                return self.list(req, table, project)
            if len(parts) == 1 and m == "POST":
                return self.create(req, table, project)
            if len(parts) == 2 and m == "GET":
                obj = self.get(table, parts[1], project)
                if obj is None:
                    return self.error(404, "%sNotFound" % table[:-1].title(),
                                      "%s %s could not be found." % (table[:-1].title(), parts[1]))
                return json_response({table[:-1]: obj})
            if len(parts) == 2 and m == "DELETE":
                return self.delete(table, parts[1], project)
        if table == "floatingips":
            return self.floatingips(req, parts, project)
        if table == "ports" and m == "GET":
            ports = self.ports(project)
            if len(parts) == 2:
                p = next((p for p in ports if p["id"] == parts[1]), None)
                if p is None:
                    return self.error(404, "PortNotFound", "Port %s could not be found." % parts[1])
                return json_response({"port": p})
            return json_response({"ports": self.filter(req, ports)})
        if table == "security-groups" and m == "GET":
            groups = [self.default_group(project)]
            if len(parts) == 2:
                g = next((g for g in groups if g["id"] == parts[1]), None)
                if g is None:
                    return self.error(404, "SecurityGroupNotFound", "Security group %s does not exist" % parts[1])
                return json_response({"security_group": g})
            return json_response({"security_groups": self.filter(req, groups)})
        return self.error(404, "HTTPNotFound", "The resource could not be found.")

    @staticmethod
    def filter(req, items):
        for key, vals in req.query_all.items():
            if key in ("fields", "limit", "marker", "sort_key", "sort_dir"):
                continue
            items = [i for i in items if str(i.get(key)).lower() in [v.lower() for v in vals]]
        return items

    def _render(self, table, obj, st, project):
        out = dict(obj, tenant_id=project, project_id=project, description="", tags=[],
                   updated_at=obj["created_at"], revision_number=1)
        if table == "networks":
            out.update(status="ACTIVE", admin_state_up=True, mtu=1450, availability_zones=["nova"],
                       availability_zone_hints=[], ipv4_address_scope=None, ipv6_address_scope=None,
                       **{"port_security_enabled": True, "router:external": obj["router:external"],
                          "provider:network_type": None},
                       subnets=sorted(s["id"] for s in neutron_read(st)["subnets"].values()
                                      if s["network_id"] == obj["id"]))
        else:
            net = ipaddress.ip_network(obj["cidr"])
            hosts = (net[2], net[min(net.num_addresses - 2, 65534)])
            out.update(allocation_pools=[{"start": str(hosts[0]), "end": str(hosts[1])}], dns_nameservers=[],
                       host_routes=[], ipv6_address_mode=None, ipv6_ra_mode=None, subnetpool_id=None,
                       service_types=[], segment_id=None)
        return out

    def list(self, req, table, project):
        st = self.state.read()
        items = [self._render(table, o, st, project) for o in neutron_read(st)[table].values()]
        return json_response({table: self.filter(req, items)})

    def get(self, table, oid, project):
        st = self.state.read()
        obj = neutron_read(st)[table].get(oid)
        return self._render(table, obj, st, project) if obj else None

    def resource_body(self, req, kind):
        """The {kind: {...}} body of a write, or the error answer Neutron gives for another."""
        try:
            body = req.json()[kind]
            if isinstance(body, dict):
                return body, None
        except (ValueError, KeyError, TypeError):
            pass
        return None, self.error(400, "BadRequest", "Resource body required: %s" % kind)

    def create(self, req, table, project):
        kind = table[:-1]
        body, err = self.resource_body(req, kind)
        if err:
            return err
        now = iso8601z(time.time())
        with self.state.locked() as st:
            ns = neutron_write(st)
            oid = str(uuid.uuid4())
            name = body.get("name") or ""
            if not isinstance(name, str) or len(name) > 255:
                return self.error(400, "HTTPBadRequest", "Invalid input for name.")
            if table == "networks":
                ns["networks"][oid] = {"id": oid, "name": name, "router:external": bool(body.get("router:external")),
                                       "shared": bool(body.get("shared")), "created_at": now}
            else:
                net = ns["networks"].get(body.get("network_id") or "")
                if net is None:
                    return self.error(404, "NetworkNotFound", "Network %s could not be found." % body.get("network_id"))
                try:
                    cidr = ipaddress.ip_network(body.get("cidr"), strict=True)
                except (TypeError, ValueError):
                    return self.error(400, "HTTPBadRequest", "Invalid input for cidr. Reason: '%s' is not a valid IP subnet."
                                      % body.get("cidr"))
                version = int(body.get("ip_version", cidr.version))
                if version != cidr.version:
                    return self.error(400, "BadRequest", "Cidr %s does not match the ip_version %d" % (cidr, version))
                for s in ns["subnets"].values():
                    if s["network_id"] == net["id"] and ipaddress.ip_network(s["cidr"]).overlaps(cidr):
                        return self.error(400, "BadRequest", "Invalid input for operation: Requested subnet with cidr: "
                                          "%s for network: %s overlaps with another subnet." % (cidr, net["id"]))
                ns["subnets"][oid] = {"id": oid, "name": name, "network_id": net["id"], "cidr": str(cidr),
                                      "ip_version": version, "gateway_ip": body.get("gateway_ip") or str(cidr[1]),
                                      "enable_dhcp": body.get("enable_dhcp", True) is not False, "created_at": now}
            obj = self._render(table, ns[table][oid], st, project)
        return json_response({kind: obj}, 201)

    def delete(self, table, oid, project):
        kind = table[:-1].title()
        with self.state.locked() as st:
            ns = neutron_write(st)
            if oid not in ns[table]:
                return self.error(404, "%sNotFound" % kind, "%s %s could not be found." % (kind, oid))
            if table == "networks":
                if any(p["network_id"] == oid for p in self.ports_of(st, project)):
                    return self.error(409, "NetworkInUse", "Unable to complete operation on network %s. "
                                      "There are one or more ports still in use on the network." % oid)
                for sid in [s for s, v in ns["subnets"].items() if v["network_id"] == oid]:
                    del ns["subnets"][sid]
            del ns[table][oid]
        return Response(204, b"", None)

    # -- floating IPs (the API reference's fields; tags and the DNS/QoS extensions left empty) --

    def _fip_json(self, f, st, project):
        port = next((p for p in self.ports_of(st, project) if p["id"] == f["port_id"]), None) if f["port_id"] else None
        fixed = f.get("fixed_ip_address") or ((port or {}).get("fixed_ips") or [{}])[0].get("ip_address")
        return {"id": f["id"], "tenant_id": project, "project_id": project,
                "floating_network_id": f["floating_network_id"], "floating_ip_address": f["floating_ip_address"],
                "fixed_ip_address": fixed if port else None, "port_id": f["port_id"] if port else None,
                "router_id": _id("router", "default") if port else None, "status": "ACTIVE" if port else "DOWN",
                "description": f["description"], "tags": [], "port_details": {
                    "name": port["name"], "network_id": port["network_id"], "mac_address": port["mac_address"],
                    "admin_state_up": True, "status": "ACTIVE", "device_id": port["device_id"],
                    "device_owner": port["device_owner"]} if port else None,
                "port_forwardings": [], "qos_policy_id": None, "dns_domain": "", "dns_name": "",
                "created_at": f["created_at"], "updated_at": f["updated_at"], "revision_number": f["revision"]}

    def _fip_port(self, st, project, port_id):
        """The port a floating IP is to be associated with (None: dissociate), or an error answer."""
        if port_id is None:
            return None, None
        port = next((p for p in self.ports_of(st, project) if p["id"] == port_id), None)
        if port is None:
            return None, self.error(404, "PortNotFound", "Port %s could not be found." % port_id)
        if not any(ipaddress.ip_address(ip["ip_address"]).version == 4 for ip in port["fixed_ips"]):
            return None, self.error(400, "BadRequest", "Bad floatingip request: Port %s does not have any IPv4 "
                                    "address." % port_id)
        return port, None

    def floatingips(self, req, parts, project):
        m = req.method
        if len(parts) == 1 and m == "GET":
            st = self.state.read()
            items = [self._fip_json(f, st, project) for f in neutron_read(st).get("floatingips", {}).values()]
            return json_response({"floatingips": self.filter(req, items)})
        if len(parts) == 1 and m == "POST":
            body, err = self.resource_body(req, "floatingip")
            if err:
                return err
            desc = body.get("description", "")
            if not isinstance(desc, str) or len(desc) > 255:
                return self.error(400, "HTTPBadRequest", "Invalid input for description.")
            now = iso8601z(time.time())
            with self.state.locked() as st:
                ns = neutron_write(st)
                net = ns["networks"].get(body.get("floating_network_id") or "")
                if net is None:
                    return self.error(404, "NetworkNotFound",
                                      "Network %s could not be found." % body.get("floating_network_id"))
                if not net["router:external"]:
                    return self.error(400, "BadRequest", "Bad floatingip request: Network %s is not a valid "
                                      "external network." % net["id"])
                port, err = self._fip_port(st, project, body.get("port_id"))
                if err:
                    return err
                fips = ns.setdefault("floatingips", {})
                used = {f["floating_ip_address"] for f in fips.values()}
                addr = st["settings"].get("neutron_floating_ip_address")
                if not addr or addr in used:
                    addr = next(str(a) for a in ipaddress.ip_network("203.0.113.0/24").hosts()
                                if int(a) & 0xff >= 10 and str(a) not in used)
                fid = str(uuid.uuid4())
                fips[fid] = {"id": fid, "floating_network_id": net["id"], "floating_ip_address": addr,
                             "port_id": port["id"] if port else None, "description": desc, "created_at": now,
                             "updated_at": now, "revision": 0}
                return json_response({"floatingip": self._fip_json(fips[fid], st, project)}, 201)
        if len(parts) == 2:
            with self.state.locked() as st:
                fips = neutron_write(st).setdefault("floatingips", {})
                f = fips.get(parts[1])
                if f is None:
                    return self.error(404, "FloatingIPNotFound", "Floating IP %s could not be found" % parts[1])
                if m == "GET":
                    return json_response({"floatingip": self._fip_json(f, st, project)})
                if m == "DELETE":
                    del fips[parts[1]]
                    return Response(204, b"", None)
                if m == "PUT":
                    body, err = self.resource_body(req, "floatingip")
                    if err:
                        return err
                    if "port_id" in body:
                        port, err = self._fip_port(st, project, body["port_id"])
                        if err:
                            return err
                        f["port_id"] = port["id"] if port else None
                    if isinstance(body.get("description"), str):
                        f["description"] = body["description"]
                    f["revision"] += 1
                    f["updated_at"] = iso8601z(time.time())
                    return json_response({"floatingip": self._fip_json(f, st, project)})
        return self.error(404, "HTTPNotFound", "The resource could not be found.")

    def ports(self, project):
        return self.ports_of(self.state.read(), project)

    def ports_of(self, st, project):
        """One port per live OpenStack server, on the network it was created on."""
        ns = neutron_read(st)
        subnets = list(ns["subnets"].values())
        out = []
        for inst in st["instances"].values():
            if inst["platform"] != "openstack" or st_mod.gone(inst):
                continue
            net_id = server_network(inst, ns)
            fixed = []
            for ip in (inst.get("private_ipv4"), inst.get("ipv6")):
                if not ip:
                    continue
                sub = next((s for s in subnets if s["network_id"] == net_id and
                            ipaddress.ip_address(ip) in ipaddress.ip_network(s["cidr"])), None)
                if sub:
                    fixed.append({"subnet_id": sub["id"], "ip_address": ip})
            out.append({"id": _id("port", inst["id"]), "name": "", "network_id": net_id,
                        "mac_address": inst["mac"], "fixed_ips": fixed, "device_id": inst["id"],
                        "device_owner": "compute:" + (inst.get("zone") or "nova"), "status": "ACTIVE",
                        "admin_state_up": True, "tenant_id": inst.get("project_id") or project,
                        "project_id": inst.get("project_id") or project, "security_groups": [_id("sg", "default")],
                        "binding:vnic_type": "normal", "port_security_enabled": True, "allowed_address_pairs": [],
                        "extra_dhcp_opts": [], "description": "", "tags": [], "created_at": iso8601z(inst["created"]),
                        "updated_at": iso8601z(inst["created"]), "revision_number": 1})
        from .openstack_octavia import vip_ports
        return out + vip_ports(st)

    @staticmethod
    def default_group(project):
        rules = [{"id": _id("sgr", d, e), "direction": d, "ethertype": e, "protocol": None,
                  "port_range_min": None, "port_range_max": None, "remote_ip_prefix": None,
                  "remote_group_id": _id("sg", "default") if d == "ingress" else None,
                  "security_group_id": _id("sg", "default"), "tenant_id": project, "project_id": project,
                  "description": "", "created_at": iso8601z(CREATED), "updated_at": iso8601z(CREATED)}
                 for d in ("ingress", "egress") for e in ("IPv4", "IPv6")]
        return {"id": _id("sg", "default"), "name": "default", "description": "Default security group",
                "tenant_id": project, "project_id": project, "security_group_rules": rules, "stateful": True,
                "tags": [], "created_at": iso8601z(CREATED), "updated_at": iso8601z(CREATED), "revision_number": 1}


def server_network(inst, ns=None):
    """The Neutron network a server's port is on: the first network asked for at create when
    Neutron knows it, else "private"."""
    nets = (inst.get("extra") or {}).get("networks")
    known = (ns or empty())["networks"]
    if isinstance(nets, list) and nets and isinstance(nets[0], dict) and nets[0].get("uuid") in known:
        return nets[0]["uuid"]
    return PRIVATE_NET
