"""OpenStack Keystone v3 (/v3) and Nova compute v2.1 (/compute/v2.1), written from the
Identity and Compute API references: password and application_credential authentication,
X-Subject-Token, a service catalog pointing at this server's Nova, token expiry; servers
create (base64 user_data, metadata, networks required from microversion 2.37 on), list with a
name regex, show, delete, server metadata (GET/PUT/POST /servers/{id}/metadata and
GET/PUT/DELETE /servers/{id}/metadata/{key}), BUILD -> ACTIVE, fault objects for ERROR, and
X-Auth-Token on every compute call; flavors with extra specs, keypairs (imported public keys),
availability zones as a project member sees them. Glance and Neutron are in openstack_services.

Nova here is more lenient than a real one in one respect: an imageRef, key_name, security group
or network UUID that Glance or Neutron do not know is accepted (the machine controller tests
use made-up ones); clients that resolve names first, like openstackclient, send known ones."""
import base64
import binascii
import hashlib
import ipaddress
import re
import secrets
import time

from . import state as st_mod
from .openstack_services import PRIVATE_NET, neutron_read, network_names, server_network
from .web import Response, iso8601z, json_response

FLAVORS = [
    {"id": "1", "name": "m1.tiny", "vcpus": 1, "ram": 512, "disk": 1},
    {"id": "2", "name": "m1.small", "vcpus": 1, "ram": 2048, "disk": 20},
    {"id": "3", "name": "m1.medium", "vcpus": 2, "ram": 4096, "disk": 40},
    {"id": "4", "name": "m1.large", "vcpus": 4, "ram": 8192, "disk": 80,
     "extra_specs": {"hw:cpu_policy": "shared", "hw_rng:allowed": "True"}},
    {"id": "5", "name": "m1.xlarge", "vcpus": 8, "ram": 16384, "disk": 160,
     "extra_specs": {"hw:cpu_policy": "dedicated", "hw:mem_page_size": "large"}},
]
MAX_MICROVERSION = "2.96"
# nova/api/validation/parameter_types.py: metadata keys and values.
METADATA_KEY = re.compile(r"^[a-zA-Z0-9-_:. /]{1,255}$")
METADATA_MAX_ITEMS = 128  # the default metadata_items quota
KEYSTONE_401 = {"error": {"code": 401, "title": "Unauthorized",
                          "message": "The request you have made requires authentication."}}


def keystone_error(status, title, message):
    return json_response({"error": {"code": status, "title": title, "message": message}}, status)


def _uuid_hex(seed):
    return hashlib.sha1(seed.encode()).hexdigest()[:32]


def flavor_by(ref):
    ref = str(ref).rstrip("/").rsplit("/", 1)[-1]
    for f in FLAVORS:
        if ref in (f["id"], f["name"]):
            return f
    return None


class Keystone:
    def __init__(self, state):
        self.state = state

    def handle(self, req):
        parts = [p for p in req.path.split("/") if p]
        base = req.base_url
        if parts == ["v3"] and req.method == "GET":
            return json_response({"version": {
                "id": "v3.14", "status": "stable", "updated": "2020-04-07T00:00:00Z",
                "links": [{"rel": "self", "href": base + "/v3/"}],
                "media-types": [{"base": "application/json", "type": "application/vnd.openstack.identity-v3+json"}]}})
        if parts == ["v3", "auth", "tokens"]:
            if req.method == "POST":
                return self.issue(req)
            if req.method in ("GET", "HEAD"):
                return self.validate(req)
        return keystone_error(404, "Not Found", "The resource could not be found.")

    def _fail(self, req):
        resp = json_response(KEYSTONE_401, 401)
        return resp.add("WWW-Authenticate", 'Keystone uri="%s/v3"' % req.base_url)

    def issue(self, req):
        try:
            body = req.json()
            ident = body["auth"]["identity"]
            methods = ident["methods"]
            if not isinstance(methods, list) or not methods:
                raise ValueError("methods")
        except (ValueError, KeyError, TypeError):
            return keystone_error(400, "Bad Request", "Invalid input for field 'identity': "
                                  "'methods' is a required property")
        settings = self.state.read()["settings"]
        scope = (body["auth"].get("scope") or {}) if isinstance(body["auth"], dict) else {}
        appcred = None
        if methods == ["password"]:
            user = self._password_user(ident.get("password") or {}, settings)
            if user is None:
                return self._fail(req)
            project = self._project(scope, user)
            if scope and project is None:
                return self._fail(req)
        elif methods == ["application_credential"]:
            appcred = self._appcred(ident.get("application_credential") or {}, settings)
            if appcred is None:
                return self._fail(req)
            user = next((u for u in settings["openstack_users"] if u["name"] == appcred["user"]), None)
            if user is None:
                return self._fail(req)
            # An application credential is scoped to its project; another scope is refused.
            if scope:
                return self._fail(req)
            project = {"id": appcred["project_id"], "name": appcred["project"]}
        else:
            return self._fail(req)
        now = time.time()
        ttl = float(settings["token_ttl"])
        token = self.state.sign("keystone", {"u": user["id"], "p": project["id"] if project else None}, ttl)
        domain = {"id": "default" if user["domain"] == "Default" else user["domain"], "name": user["domain"]}
        tok = {
            "methods": methods,
            "user": {"domain": domain, "id": user["id"], "name": user["name"], "password_expires_at": None},
            "audit_ids": [base64.urlsafe_b64encode(secrets.token_bytes(16)).decode().rstrip("=")],
            "expires_at": iso8601z(now + ttl, micro=True),
            "issued_at": iso8601z(now, micro=True),
        }
        if project:
            tok["project"] = {"domain": domain, "id": project["id"], "name": project["name"]}
            tok["is_domain"] = False
            tok["roles"] = [{"id": _uuid_hex("member"), "name": "member"},
                            {"id": _uuid_hex("reader"), "name": "reader"}]
            tok["catalog"] = self.catalog(req.base_url, settings["openstack_region"],
                                          settings.get("openstack_octavia", False))
        if appcred:
            tok["application_credential"] = {"id": appcred["id"], "name": appcred["name"], "restricted": True}
        resp = json_response({"token": tok}, 201)
        return resp.add("X-Subject-Token", token)

    def _password_user(self, pw, settings):
        u = pw.get("user") or {}
        for user in settings["openstack_users"]:
            if u.get("id") and u["id"] != user["id"]:
                continue
            if not u.get("id"):
                d = u.get("domain") or {}
                if u.get("name") != user["name"]:
                    continue
                if d.get("name", d.get("id")) not in (user["domain"], "default" if user["domain"] == "Default" else None):
                    continue
            if u.get("password") == user["password"]:
                return user
            return None
        return None

    def _project(self, scope, user):
        p = scope.get("project")
        if not p:
            return None
        if p.get("id") == user["project_id"] or p.get("name") == user["project"]:
            return {"id": user["project_id"], "name": user["project"]}
        return None

    def _appcred(self, ac, settings):
        for cred in settings["openstack_application_credentials"]:
            if ac.get("id"):
                if ac["id"] != cred["id"]:
                    continue
            else:
                # By name, a credential is only unique together with its owner.
                owner = ac.get("user") or {}
                user = next((u for u in settings["openstack_users"] if u["name"] == cred["user"]), None)
                if ac.get("name") != cred["name"] or user is None or \
                        (owner.get("id") != user["id"] and owner.get("name") != user["name"]):
                    continue
            return cred if ac.get("secret") == cred["secret"] else None
        return None

    def validate(self, req):
        if self.state.verify("keystone", req.header("X-Auth-Token")) is None:
            return self._fail(req)
        subject = self.state.verify("keystone", req.header("X-Subject-Token"))
        if subject is None:
            return keystone_error(404, "Not Found", "Could not find token.")
        return json_response({"token": {"expires_at": iso8601z(subject["exp"], micro=True),
                                        "methods": ["password"]}}).add("X-Subject-Token", req.header("X-Subject-Token"))

    @staticmethod
    def catalog(base, region, octavia=False):
        def endpoints(url, seed):
            return [{"id": _uuid_hex(seed + iface), "interface": iface, "region": region,
                     "region_id": region, "url": url} for iface in ("admin", "internal", "public")]
        return [
            {"endpoints": endpoints(base + "/compute/v2.1", "nova"), "id": _uuid_hex("compute"),
             "type": "compute", "name": "nova"},
            {"endpoints": endpoints(base + "/image", "glance"), "id": _uuid_hex("image"),
             "type": "image", "name": "glance"},
            {"endpoints": endpoints(base + "/network", "neutron"), "id": _uuid_hex("network"),
             "type": "network", "name": "neutron"},
            {"endpoints": endpoints(base + "/v3", "keystone"), "id": _uuid_hex("identity"),
             "type": "identity", "name": "keystone"},
        ] + ([{"endpoints": endpoints(base + "/load-balancer", "octavia"), "id": _uuid_hex("load-balancer"),
               "type": "load-balancer", "name": "octavia"}] if octavia else [])


def allocate_fixed_ips(st, inst):
    """Addresses of a new server's port from the subnets of its Neutron network: the next free
    host of the first IPv4 and the first IPv6 subnet (none when the network has no such subnet).
    A server on the default network keeps what the inventory gave it."""
    ns = neutron_read(st)
    net = server_network(inst, ns)
    if net == PRIVATE_NET:
        return
    used = {i.get(k) for i in st["instances"].values() for k in ("private_ipv4", "ipv6")}
    for version, key in ((4, "private_ipv4"), (6, "ipv6")):
        inst[key] = None
        sub = next((x for x in ns["subnets"].values() if x["network_id"] == net and x["ip_version"] == version), None)
        if sub is None:
            continue
        for n, ip in enumerate(ipaddress.ip_network(sub["cidr"]).hosts()):
            if n > 4096:
                break
            if str(ip) != sub["gateway_ip"] and str(ip) not in used:
                inst[key] = str(ip)
                break


def nova_error(status, message):
    names = {400: "badRequest", 403: "forbidden", 404: "itemNotFound", 409: "conflictingRequest",
             413: "overLimit"}
    return json_response({names.get(status, "computeFault"): {"code": status, "message": message}}, status)


# The compute availability zones of the fake region: "nova" (Nova's default) and two more, one of
# them unavailable (a zone whose hosts are all disabled). The setting nova_extra_zones adds
# available ones after them.
AVAILABILITY_ZONES = [("nova", True), ("az-2", True), ("az-maintenance", False)]


def availability_zones(settings):
    """GET /os-availability-zone as a project user sees it (hosts only for admins)."""
    zones = AVAILABILITY_ZONES + [(name, True) for name in settings.get("nova_extra_zones") or []]
    return json_response({"availabilityZoneInfo": [
        {"zoneName": name, "zoneState": {"available": up}, "hosts": None} for name, up in zones]})


class Nova:
    def __init__(self, state):
        self.state = state

    def handle(self, req):
        parts = [p for p in req.path.split("/") if p][2:]
        base = req.base_url + "/compute/v2.1"
        if not parts and req.method == "GET":
            # The version document needs no token.
            return self._versioned(req, json_response({"version": self._version(base)}))
        token = self.state.verify("keystone", req.header("X-Auth-Token"))
        if token is None or not token.get("p"):
            return json_response(KEYSTONE_401, 401).add("WWW-Authenticate", 'Keystone uri="%s/v3"' % req.base_url)
        # Old-style URLs carry the project id: /compute/v2.1/<project>/servers.
        if parts and parts[0] == token["p"]:
            parts = parts[1:]
        resp = self.route(req, parts, token, base)
        return self._versioned(req, resp)

    @staticmethod
    def microversion(req):
        want = req.header("OpenStack-API-Version") or ""
        legacy = req.header("X-OpenStack-Nova-API-Version")
        v = "2.1"
        m = re.match(r"^\s*compute\s+(\S+)\s*$", want)
        if m:
            v = m.group(1)
        elif legacy:
            v = legacy.strip()
        if v == "latest":
            v = MAX_MICROVERSION
        return v

    @staticmethod
    def at_least(v, want):
        try:
            return tuple(int(x) for x in v.split(".")) >= tuple(int(x) for x in want.split("."))
        except ValueError:
            return False

    def _versioned(self, req, resp):
        v = self.microversion(req)
        resp.add("OpenStack-API-Version", "compute " + v).add("X-OpenStack-Nova-API-Version", v)
        resp.add("Vary", "OpenStack-API-Version, X-OpenStack-Nova-API-Version")
        return resp

    @staticmethod
    def _version(base):
        return {"id": "v2.1", "status": "CURRENT", "version": MAX_MICROVERSION, "min_version": "2.1",
                "updated": "2013-07-23T11:33:21Z", "links": [{"rel": "self", "href": base + "/"}],
                "media-types": [{"base": "application/json",
                                 "type": "application/vnd.openstack.compute+json;version=2.1"}]}

    def route(self, req, parts, token, base):
        m = req.method
        now = time.time()
        if parts == ["os-availability-zone"] and m == "GET":
            with self.state.locked() as st:
                settings = dict(st["settings"])
            return availability_zones(settings)
        if parts == ["os-availability-zone", "detail"] and m == "GET":
            # Admin only under Nova's default policy; clients fall back to the plain list.
            return nova_error(403, "Policy doesn't allow os_compute_api:os-availability-zone:detail to be performed.")
        if parts and parts[0] == "os-keypairs":
            return self.keypairs(req, parts[1:], token, now)
        if len(parts) == 3 and parts[0] == "flavors" and parts[2] == "os-extra_specs" and m == "GET":
            f = flavor_by(parts[1])
            if f is None or f["id"] != parts[1]:
                return nova_error(404, "Flavor %s could not be found." % parts[1])
            return json_response({"extra_specs": dict(f.get("extra_specs") or {})})
        if parts == ["servers"] and m == "POST":
            return self.create(req, token, base, now)
        if parts in (["servers"], ["servers", "detail"]) and m == "GET":
            return self.list(req, token, base, now, detail=(parts[-1] == "detail"))
        if len(parts) == 2 and parts[0] == "servers":
            if m == "GET":
                inst = self._get(parts[1])
                if inst is None:
                    return nova_error(404, "Instance %s could not be found." % parts[1])
                return json_response({"server": self.server_json(inst, base, now)})
            if m == "DELETE":
                return self.delete(req, parts[1], now)
        if len(parts) == 3 and parts[0] == "servers" and parts[2] == "action" and m == "POST":
            return self.action(req, parts[1])
        if len(parts) >= 3 and parts[0] == "servers" and parts[2] == "metadata":
            # A key with a '/' arrives %2F-decoded, as through Nova's WSGI router: it cannot be
            # addressed in the path (only through the collection).
            if len(parts) == 3 and m in ("GET", "PUT", "POST"):
                return self.metadata(req, parts[1], None)
            if len(parts) == 4 and m in ("GET", "PUT", "DELETE"):
                return self.metadata(req, parts[1], parts[3])
        if parts in (["flavors"], ["flavors", "detail"]) and m == "GET":
            v261 = self.at_least(self.microversion(req), "2.61")
            return json_response({"flavors": [self.flavor_json(f, base, parts[-1] == "detail", v261) for f in FLAVORS]})
        if len(parts) == 2 and parts[0] == "flavors" and m == "GET":
            f = flavor_by(parts[1])
            if f is None or f["id"] != parts[1]:
                return nova_error(404, "Flavor %s could not be found." % parts[1])
            return json_response({"flavor": self.flavor_json(f, base, True,
                                                             self.at_least(self.microversion(req), "2.61"))})
        return nova_error(404, "The resource could not be found.")

    @staticmethod
    def flavor_json(f, base, detail, extra_specs=False):
        out = {"id": f["id"], "name": f["name"],
               "links": [{"rel": "self", "href": "%s/flavors/%s" % (base, f["id"])},
                         {"rel": "bookmark", "href": "%s/flavors/%s" % (base, f["id"])}]}
        if detail:
            out.update({"vcpus": f["vcpus"], "ram": f["ram"], "disk": f["disk"], "OS-FLV-EXT-DATA:ephemeral": 0,
                        "swap": 0, "rxtx_factor": 1.0, "os-flavor-access:is_public": True,
                        "OS-FLV-DISABLED:disabled": False, "description": None})
            if extra_specs:
                out["extra_specs"] = dict(f.get("extra_specs") or {})
        return out

    def _get(self, sid, st=None):
        st = st or self.state.read()
        inst = st["instances"].get(sid)
        if inst is None or inst["platform"] != "openstack" or st_mod.gone(inst):
            return None
        return inst

    def server_json(self, inst, base, now):
        ext = inst.get("extra") or {}
        flavor = flavor_by(ext.get("flavor") or inst["type"]) or FLAVORS[1]
        building = now < inst["ready_at"]
        if inst.get("error"):
            status, vm_state, power, task = "ERROR", "error", 0, None
        elif building:
            status, vm_state, power, task = "BUILD", "building", 0, "spawning"
        elif inst["status"] == "stopped":
            status, vm_state, power, task = "SHUTOFF", "stopped", 4, None
        else:
            status, vm_state, power, task = "ACTIVE", "active", 1, None
        if inst.get("delete_at"):
            task = "deleting"
        addresses = {}
        if not building and not inst.get("error"):
            net = []
            if inst.get("private_ipv4"):
                net.append({"version": 4, "addr": inst["private_ipv4"], "OS-EXT-IPS:type": "fixed",
                            "OS-EXT-IPS-MAC:mac_addr": inst["mac"]})
            if inst.get("ipv6"):
                net.append({"version": 6, "addr": inst["ipv6"], "OS-EXT-IPS:type": "fixed",
                            "OS-EXT-IPS-MAC:mac_addr": inst["mac"]})
            if inst.get("public_ipv4"):
                net.append({"version": 4, "addr": inst["public_ipv4"], "OS-EXT-IPS:type": "floating",
                            "OS-EXT-IPS-MAC:mac_addr": inst["mac"]})
            if net:
                st = self.state.read()
                addresses[network_names(st).get(server_network(inst, neutron_read(st)), "private")] = net
        project = inst.get("project_id") or "p-demo"
        image = ext.get("image") or inst["image"]
        out = {
            "id": inst["id"],
            "name": inst["name"],
            "status": status,
            "tenant_id": project,
            "user_id": ext.get("user_id") or "u-demo",
            "metadata": dict(inst.get("labels") or {}),
            "hostId": hashlib.sha224((project + "compute-1").encode()).hexdigest(),
            "image": {"id": image, "links": [{"rel": "bookmark", "href": "%s/images/%s" % (base, image)}]},
            "flavor": {"id": flavor["id"], "links": [{"rel": "bookmark", "href": "%s/flavors/%s" % (base, flavor["id"])}]},
            "created": iso8601z(inst["created"]),
            "updated": iso8601z(max(inst["created"], min(now, inst["ready_at"]))),
            "addresses": addresses,
            "accessIPv4": "",
            "accessIPv6": "",
            "links": [{"rel": "self", "href": "%s/servers/%s" % (base, inst["id"])},
                      {"rel": "bookmark", "href": "%s/servers/%s" % (base, inst["id"])}],
            "OS-DCF:diskConfig": "MANUAL",
            "progress": 0,
            "OS-EXT-AZ:availability_zone": inst["zone"] if not building else "",
            "config_drive": "True" if ext.get("config_drive") else "",
            "key_name": ext.get("key_name"),
            "OS-SRV-USG:launched_at": None if building else iso8601z(inst["ready_at"], micro=True)[:-1],
            "OS-SRV-USG:terminated_at": None,
            "OS-EXT-STS:task_state": task,
            "OS-EXT-STS:vm_state": vm_state,
            "OS-EXT-STS:power_state": power,
            "os-extended-volumes:volumes_attached": [],
            "security_groups": ext.get("security_groups") or [{"name": "default"}],
            "locked": False,
        }
        if inst.get("error"):
            e = inst["error"]
            out["fault"] = {"code": int(e.get("code", 500)), "created": iso8601z(inst["ready_at"]),
                            "message": e.get("message", "No valid host was found. "),
                            "details": e.get("details", "")}
        return out

    def list(self, req, token, base, now, detail):
        name = req.query.get("name")
        try:
            rx = re.compile(name) if name else None
        except re.error:
            return nova_error(400, "Invalid regular expression in name filter")
        try:
            ip_rx = re.compile(req.query["ip"]) if req.query.get("ip") else None
        except re.error:
            return nova_error(400, "Invalid regular expression in ip filter")
        status = req.query.get("status")
        out = []
        for inst in self.state.instances():
            if inst["platform"] != "openstack":
                continue
            if rx and not rx.search(inst["name"]):
                continue
            j = self.server_json(inst, base, now)
            if status and j["status"] != status.upper():
                continue
            if ip_rx and not any(ip_rx.search(a["addr"]) for net in j["addresses"].values() for a in net
                                 if a["version"] == 4):
                continue
            out.append(j)
        # Nova lists newest first.
        out.sort(key=lambda s: s["created"], reverse=True)
        marker = req.query.get("marker")
        if marker:
            ids = [s["id"] for s in out]
            if marker not in ids:
                return nova_error(400, "marker [%s] not found" % marker)
            out = out[ids.index(marker) + 1:]
        links = []
        if req.query.get("limit"):
            try:
                limit = int(req.query["limit"])
            except ValueError:
                return nova_error(400, "Invalid input for query parameters limit.")
            if len(out) > limit:
                out = out[:limit]
                links = [{"rel": "next", "href": "%s/servers%s?limit=%d&marker=%s" % (
                    base, "/detail" if detail else "", limit, out[-1]["id"])}]
        if not detail:
            out = [{"id": s["id"], "name": s["name"], "links": s["links"]} for s in out]
        body = {"servers": out}
        if links:
            body["servers_links"] = links
        return json_response(body)

    def create(self, req, token, base, now):
        try:
            body = req.json()
            server = body["server"]
            if not isinstance(server, dict):
                raise TypeError
        except (ValueError, KeyError, TypeError):
            return nova_error(400, "Invalid input for field/attribute server. Value: None. 'server' is a required property")
        name = server.get("name")
        if not isinstance(name, str) or not name.strip() or len(name) > 255:
            return nova_error(400, "Invalid input for field/attribute name.")
        flavor = flavor_by(server.get("flavorRef") or "")
        if not server.get("flavorRef"):
            return nova_error(400, "Invalid input for field/attribute server. 'flavorRef' is a required property")
        if flavor is None:
            return nova_error(400, "Flavor %s could not be found." % server["flavorRef"])
        if not server.get("imageRef") and not server.get("block_device_mapping_v2"):
            return nova_error(400, "Block Device Mapping is Invalid: Boot sequence for the instance and "
                              "image/block device mapping combination is not valid.")
        meta = server.get("metadata") or {}
        if not self.metadata_ok(meta):
            return nova_error(400, "Invalid input for field/attribute metadata.")
        networks = server.get("networks")
        if self.at_least(self.microversion(req), "2.37"):
            if networks is None:
                return nova_error(400, "Invalid input for field/attribute server. 'networks' is a required property")
            if not (networks in ("auto", "none") or (isinstance(networks, list) and all(
                    isinstance(n, dict) and (n.get("uuid") or n.get("port")) for n in networks))):
                return nova_error(400, "Invalid input for field/attribute networks.")
        groups = server.get("security_groups") or [{"name": "default"}]
        if not isinstance(groups, list) or not all(isinstance(g, dict) and g.get("name") for g in groups):
            return nova_error(400, "Invalid input for field/attribute security_groups.")
        ud = server.get("user_data")
        user_data = None
        if ud is not None:
            try:
                raw = base64.b64decode(ud, validate=True)
            except (binascii.Error, ValueError, TypeError):
                return nova_error(400, "User data needs to be valid base 64.")
            if len(ud) > 65535:
                return nova_error(400, "User data too large. User data must be no larger than 65535 bytes once "
                                  "base64 encoded.")
            user_data = raw.decode("utf-8", "surrogateescape")
        with self.state.locked() as st:
            spec = {"platform": "openstack", "name": name, "type": flavor["name"], "labels": meta,
                    "user_data": user_data, "project_id": token["p"],
                    "zone": server.get("availability_zone") or "nova",
                    "region": st["settings"]["openstack_region"],
                    "extra": {"flavor": flavor["id"], "image": server.get("imageRef") or "",
                              "key_name": server.get("key_name"), "config_drive": bool(server.get("config_drive")),
                              "user_id": token["u"], "networks": networks,
                              "security_groups": [{"name": g["name"]} for g in groups]}}
            inst = st_mod.add_instance(st, spec, source="openstack")
            inst["public_ipv4"] = None  # Nova allocates no floating IP by itself.
            allocate_fixed_ips(st, inst)
            inst["ready_at"] = now + float(st["settings"]["build_seconds"])
            errs = st["settings"].get("nova_build_errors") or []
            if errs:
                inst["error"] = errs.pop(0)
                st["settings"]["nova_build_errors"] = errs
        resp = json_response({"server": {
            "id": inst["id"],
            "links": [{"rel": "self", "href": "%s/servers/%s" % (base, inst["id"])},
                      {"rel": "bookmark", "href": "%s/servers/%s" % (base, inst["id"])}],
            "OS-DCF:diskConfig": "MANUAL",
            "security_groups": [{"name": "default"}],
            "adminPass": secrets.token_urlsafe(9),
        }}, 202)
        return resp.add("Location", "%s/servers/%s" % (base, inst["id"]))

    # -- keypairs (per user) ---------------------------------------------------------------

    @staticmethod
    def keypair_json(k, full):
        out = {"name": k["name"], "public_key": k["public_key"], "fingerprint": k["fingerprint"], "type": k["type"]}
        if full:
            out.update(user_id=k["user_id"], created_at=k["created_at"], deleted=False, deleted_at=None,
                       updated_at=None, id=k["id"])
        return out

    def keypairs(self, req, rest, token, now):
        m = req.method
        user = token["u"]
        if not rest and m == "GET":
            mine = (self.state.read().get("nova_keypairs") or {}).get(user, {})
            return json_response({"keypairs": [{"keypair": self.keypair_json(k, False)}
                                               for k in sorted(mine.values(), key=lambda k: k["name"])]})
        if not rest and m == "POST":
            try:
                body = req.json()["keypair"]
                name = body["name"]
            except (ValueError, KeyError, TypeError):
                return nova_error(400, "Invalid input for field/attribute keypair. 'name' is a required property")
            if not isinstance(name, str) or not re.match(r"^[a-zA-Z0-9 _.@-]{1,255}$", name):
                return nova_error(400, "Keypair data is invalid: Keypair name contains unsafe characters")
            pk = body.get("public_key")
            if not pk:
                # Generating a key pair server-side went away in microversion 2.92; this fake only
                # imports public keys.
                return nova_error(400, "Invalid input for field/attribute keypair. 'public_key' is a required property")
            fields = pk.split() if isinstance(pk, str) else []
            try:
                blob = base64.b64decode(fields[1], validate=True) if len(fields) >= 2 else b""
            except (binascii.Error, ValueError):
                blob = b""
            if len(blob) < 4 or blob[4:4 + int.from_bytes(blob[:4], "big")] != fields[0].encode():
                return nova_error(400, "Keypair data is invalid: failed to generate fingerprint")
            fp = hashlib.md5(blob).hexdigest()
            kind = body.get("type", "ssh")
            if kind not in ("ssh", "x509"):
                return nova_error(400, "Invalid input for field/attribute type.")
            with self.state.locked() as st:
                mine = st.setdefault("nova_keypairs", {}).setdefault(user, {})
                if name in mine:
                    return nova_error(409, "Key pair '%s' already exists." % name)
                k = {"name": name, "public_key": pk.strip(), "type": kind, "user_id": user,
                     "fingerprint": ":".join(fp[i:i + 2] for i in range(0, 32, 2)),
                     "created_at": iso8601z(now, micro=True)[:-1], "id": st_mod._next(st, "numeric")}
                mine[name] = k
            return json_response({"keypair": self.keypair_json(k, False) | {"user_id": user}},
                                 201 if self.at_least(self.microversion(req), "2.2") else 200)
        if len(rest) == 1 and m in ("GET", "DELETE"):
            with self.state.locked() as st:
                mine = st.setdefault("nova_keypairs", {}).setdefault(user, {})
                k = mine.get(rest[0])
                if k is None:
                    return nova_error(404, "Keypair %s not found for user %s" % (rest[0], user))
                if m == "DELETE":
                    del mine[rest[0]]
                    return Response(202 if not self.at_least(self.microversion(req), "2.2") else 204, b"", None)
            return json_response({"keypair": self.keypair_json(k, True)})
        return nova_error(404, "The resource could not be found.")

    @staticmethod
    def metadata_ok(meta):
        return isinstance(meta, dict) and len(meta) <= METADATA_MAX_ITEMS and all(
            isinstance(k, str) and METADATA_KEY.match(k) and isinstance(v, str) and len(v) <= 255
            for k, v in meta.items())

    def _on_server(self, req, sid, fn, with_body=True):
        """fn(st, inst, body) on the live server sid under the state lock; Nova's 400 for a body
        that is not JSON, 404 for an unknown server."""
        body = None
        if with_body:
            try:
                body = req.json()
            except ValueError:
                return nova_error(400, "Malformed request body")
        with self.state.locked() as st:
            inst = self._get(sid, st)
            if inst is None:
                return nova_error(404, "Instance %s could not be found." % sid)
            return fn(st, inst, body)

    def metadata(self, req, sid, key):
        """Server metadata API: GET lists; PUT replaces all; POST merges; .../{key} one item."""
        return self._on_server(req, sid, lambda st, inst, body: self._metadata(req.method, sid, key, inst, body),
                               with_body=req.method in ("PUT", "POST"))

    def _metadata(self, m, sid, key, inst, body):
        meta = inst.setdefault("labels", {})
        if key is None:
            if m == "GET":
                return json_response({"metadata": dict(meta)})
            new = body.get("metadata") if isinstance(body, dict) else None
            merged = dict(new or {}) if m == "PUT" else dict(meta, **(new or {}))
            if new is None or not self.metadata_ok(new) or not self.metadata_ok(merged):
                return nova_error(400, "Invalid input for field/attribute metadata.")
            if inst.get("delete_at"):
                return nova_error(409, "Cannot 'update metadata' instance %s while it is in task_state deleting" % sid)
            inst["labels"] = merged
            return json_response({"metadata": dict(merged)})
        if m in ("GET", "DELETE") and key not in meta:
            return nova_error(404, "Metadata item was not found")
        if m == "GET":
            return json_response({"meta": {key: meta[key]}})
        if m == "DELETE":
            del meta[key]
            return Response(204, b"", None)
        item = body.get("meta") if isinstance(body, dict) else None
        if not isinstance(item, dict) or len(item) != 1 or not self.metadata_ok(item):
            return nova_error(400, "Invalid input for field/attribute meta.")
        if key not in item:
            return nova_error(400, "Request body and URI mismatch")
        meta[key] = item[key]
        return json_response({"meta": dict(item)})

    def delete(self, req, sid, now):
        def mark(st, inst, body):
            inst["delete_at"] = now + float(st["settings"]["build_seconds"])
            return Response(204, b"", None)
        return self._on_server(req, sid, mark, with_body=False)

    def action(self, req, sid):
        return self._on_server(req, sid, self._action)

    def _action(self, st, inst, body):
        sid = inst["id"]
        if "os-stop" in body:
            if inst["status"] == "stopped":
                return nova_error(409, "Cannot 'stop' instance %s while it is in vm_state stopped" % sid)
            inst["status"] = "stopped"
        elif "os-start" in body:
            if inst["status"] == "running":
                return nova_error(409, "Cannot 'start' instance %s while it is in vm_state active" % sid)
            inst["status"] = "running"
        elif "reboot" not in body:
            return nova_error(400, "There is no such action: %s" % ",".join(body))
        return Response(202, b"", None)
