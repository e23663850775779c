"""Hetzner Cloud API resources besides servers, as the hcloud CLI and hcloud-go use them:
images (system images per architecture, snapshots made from servers), SSH keys, networks with
subnets and routes, placement groups, load balancers with targets and services, and load
balancer types. Each list is paged (meta.pagination) and takes `name` and `label_selector`;
writes that run in the background answer an action to poll, as the real API does.

State lives in state["hetzner"]; the network 4711 ("default", 10.0.0.0/16) exists from the
start, since instances get their private addresses from 10.0.0.0/16."""
import base64
import hashlib
import ipaddress

from . import state as st_mod
from .web import Response, iso8601, json_response

CREATED = 1704067200.0  # 2024-01-01, the creation time of the catalog's system images
NETWORK_ZONES = ("eu-central", "us-east", "us-west", "ap-southeast")
LB_TYPES = [
    {"id": 1, "name": "lb11", "description": "LB11", "max_connections": 10000, "max_services": 5,
     "max_targets": 25, "max_assigned_certificates": 10},
    {"id": 2, "name": "lb21", "description": "LB21", "max_connections": 20000, "max_services": 15,
     "max_targets": 75, "max_assigned_certificates": 25},
    {"id": 3, "name": "lb31", "description": "LB31", "max_connections": 40000, "max_services": 30,
     "max_targets": 150, "max_assigned_certificates": 50},
]
SSH_KEY_TYPES = ("ssh-rsa", "ssh-ed25519", "ssh-dss", "ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384",
                 "ecdsa-sha2-nistp521", "sk-ssh-ed25519@openssh.com", "sk-ecdsa-sha2-nistp256@openssh.com")


def empty():
    return {"ssh_keys": {}, "placement_groups": {}, "load_balancers": {}, "images": {},
            "networks": {"4711": {"id": 4711, "name": "default", "ip_range": "10.0.0.0/16",
                                  "subnets": [{"type": "cloud", "ip_range": "10.0.0.0/16",
                                               "network_zone": "eu-central", "gateway": "10.0.0.1",
                                               "vswitch_id": None}],
                                  "routes": [], "labels": {}, "protection": {"delete": False},
                                  "expose_routes_to_vswitch": False, "created": CREATED}}}


def hz(st):
    """The resource tables of a state being written (created on first use)."""
    if "hetzner" not in st:
        st["hetzner"] = empty()
    return st["hetzner"]


def hz_read(st):
    return st.get("hetzner") or empty()


def no_content():
    return Response(204, b"", None)


def price(net, gross):
    return {"net": net, "gross": gross}


class Resources:
    """Mixed into hetzner.Api: needs self.state, self._paged, self._new_action, self._server,
    self.server_json, and the module's ApiError/invalid_field/valid_label/parse_selector."""

    # -- helpers -----------------------------------------------------------------------

    def _err(self):
        from . import hetzner
        return hetzner

    def _select(self, req, items):
        """Filters every list takes: name, label_selector; sort by id."""
        h = self._err()
        name = req.query.get("name")
        pred = h.parse_selector(req.query["label_selector"]) if req.query.get("label_selector") else None
        out = [i for i in items if (name is None or i["name"] == name) and
               (pred is None or pred(i.get("labels") or {}))]
        return sorted(out, key=lambda i: i["id"])

    def _labels(self, body, required=False):
        h = self._err()
        labels = body.get("labels")
        if labels is None:
            return None
        if not isinstance(labels, dict) or not all(h.valid_label(k, v) for k, v in labels.items()):
            raise h.invalid_field("labels", "label key or value is invalid")
        return dict(labels)

    def _name(self, body, field="name", required=True):
        h = self._err()
        name = body.get(field)
        if name is None and not required:
            return None
        if not isinstance(name, str) or not name or len(name) > 128:
            raise h.invalid_field(field, "Missing data for required field." if name in (None, "")
                                  else "must be a string of at most 128 characters")
        return name

    def _get(self, st, table, rid, what):
        h = self._err()
        obj = hz_read(st)[table].get(str(rid))
        if obj is None:
            raise h.ApiError(404, "not_found", "%s with ID '%s' not found" % (what, rid))
        return obj

    def _taken(self, table, name, skip=None):
        h = self._err()
        if any(o["name"] == name and o["id"] != skip for o in table.values()):
            raise h.ApiError(409, "uniqueness_error", "name is already used", {"fields": [{"name": "name"}]})

    def _action(self, st, command, resources, now, err=None):
        aid = str(st_mod._next(st, "action"))
        a = {"id": int(aid), "command": command, "started": now, "error": err,
             "resources": [{"id": int(i), "type": t} for t, i in resources]}
        st["actions"][aid] = a
        return a

    def _action_response(self, action, st, status=201, **extra):
        from .hetzner import action_json
        body = {"action": action_json(action, st["settings"], action["started"])}
        body.update(extra)
        return json_response(body, status)

    def route_resources(self, req, parts, now):
        """The answer for a resource path, or None when the path is not one of these."""
        m = req.method
        tables = {"ssh_keys": ("ssh_key", self.ssh_key_json),
                  "networks": ("network", self.network_json),
                  "placement_groups": ("placement_group", self.placement_group_json),
                  "load_balancers": ("load_balancer", self.load_balancer_json)}
        if parts and parts[0] == "images":
            return self.route_images(req, parts, now)
        if parts in (["load_balancer_types"],) and m == "GET":
            return self._paged(req, "load_balancer_types", self._select(req, [self.lb_type_json(t) for t in LB_TYPES]))
        if len(parts) == 2 and parts[0] == "load_balancer_types" and m == "GET":
            t = next((t for t in LB_TYPES if str(t["id"]) == parts[1]), None)
            if t is None:
                raise self._err().ApiError(404, "not_found", "load balancer type with ID '%s' not found" % parts[1])
            return json_response({"load_balancer_type": self.lb_type_json(t)})
        if not parts or parts[0] not in tables:
            return None
        table = parts[0]
        single, render = tables[table]
        if len(parts) == 1 and m == "GET":
            st = self.state.read()
            items = [render(o, st) for o in hz_read(st)[table].values()]
            if table == "ssh_keys" and req.query.get("fingerprint"):
                items = [i for i in items if i["fingerprint"] == req.query["fingerprint"]]
            if table == "placement_groups" and req.query.get("type"):
                items = [i for i in items if i["type"] == req.query["type"]]
            return self._paged(req, table, self._select(req, items))
        if len(parts) == 1 and m == "POST":
            return getattr(self, "create_" + single)(req, now)
        if len(parts) == 2 and m == "GET":
            st = self.state.read()
            return json_response({single: render(self._get(st, table, parts[1], single.replace("_", " ")), st)})
        if len(parts) == 2 and m == "PUT":
            return self.update_resource(req, table, single, parts[1], render)
        if len(parts) == 2 and m == "DELETE":
            return self.delete_resource(table, single, parts[1], now)
        if len(parts) == 4 and parts[2] == "actions" and m == "POST":
            handler = getattr(self, "%s_%s" % (single, parts[3]), None)
            if handler is None:
                raise self._err().ApiError(404, "not_found", "not found")
            return handler(req, parts[1], now)
        if len(parts) == 3 and parts[2] == "actions" and m == "GET":
            st = self.state.read()
            self._get(st, table, parts[1], single.replace("_", " "))
            from .hetzner import action_json
            acts = [action_json(a, st["settings"], now) for a in st["actions"].values()
                    if any(r["id"] == int(parts[1]) and r["type"] == single for r in a["resources"])]
            return self._paged(req, "actions", acts)
        return None

    def update_resource(self, req, table, single, rid, render):
        h = self._err()
        body = h.json_body(req)
        labels = self._labels(body)
        name = self._name(body, required=False)
        with self.state.locked() as st:
            t = hz(st)[table]
            obj = t.get(str(rid))
            if obj is None:
                raise h.ApiError(404, "not_found", "%s with ID '%s' not found" % (single.replace("_", " "), rid))
            if name is not None:
                self._taken(t, name, obj["id"])
                obj["name"] = name
            if labels is not None:
                obj["labels"] = labels
            if table == "networks" and isinstance(body.get("expose_routes_to_vswitch"), bool):
                obj["expose_routes_to_vswitch"] = body["expose_routes_to_vswitch"]
            return json_response({single: render(obj, st)})

    def delete_resource(self, table, single, rid, now):
        h = self._err()
        with self.state.locked() as st:
            t = hz(st)[table]
            obj = t.get(str(rid))
            if obj is None:
                raise h.ApiError(404, "not_found", "%s with ID '%s' not found" % (single.replace("_", " "), rid))
            if (obj.get("protection") or {}).get("delete"):
                raise h.ApiError(423, "protected", "%s is delete protected" % single.replace("_", " "))
            if table == "networks":
                # The API detaches servers and load balancers in the background.
                for inst in st["instances"].values():
                    if any(a["network"] == obj["id"] for a in self.attachments(inst)):
                        inst.setdefault("extra", {})["private_nets"] = [
                            dict(a) for a in self.attachments(inst) if a["network"] != obj["id"]]
                        self._sync_primary(inst)
                for lb in hz(st)["load_balancers"].values():
                    lb["private_net"] = [p for p in lb["private_net"] if p["network"] != obj["id"]]
            if table == "placement_groups" and self._group_servers(st, obj["id"]):
                raise h.ApiError(422, "resource_in_use", "placement group still has servers")
            del t[str(rid)]
        return no_content()

    # -- images --------------------------------------------------------------------------

    def system_images(self):
        from .hetzner import IMAGES
        out = []
        for name, iid in IMAGES.items():
            for arch, delta in (("x86", 0), ("arm", 1)):
                out.append({"id": iid + delta, "type": "system", "status": "available", "name": name,
                            "description": name.replace("-", " ").title(), "image_size": None,
                            "disk_size": 5, "created": iso8601(CREATED), "created_from": None,
                            "bound_to": None, "os_flavor": name.split("-")[0],
                            "os_version": name.partition("-")[2] or None, "rapid_deploy": True,
                            "protection": {"delete": False}, "deprecated": None, "deleted": None,
                            "labels": {}, "architecture": arch})
        return out

    def all_images(self, st):
        return self.system_images() + [dict(i) for i in hz_read(st)["images"].values()]

    def image_by(self, st, name_or_id, arch="x86"):
        """A server create's image: by ID, else by name for the server type's architecture."""
        for i in self.all_images(st):
            if str(name_or_id) == str(i["id"]):
                return i
        for i in self.all_images(st):
            if i["name"] == name_or_id and i["architecture"] == arch:
                return i
        return None

    def route_images(self, req, parts, now):
        h = self._err()
        m = req.method
        st = self.state.read()
        if len(parts) == 1 and m == "GET":
            items = self.all_images(st)
            q = req.query_all
            for key in ("type", "status", "architecture"):
                if q.get(key):
                    items = [i for i in items if i[key] in q[key]]
            if q.get("bound_to"):
                items = [i for i in items if str(i["bound_to"]) in q["bound_to"]]
            if req.query.get("include_deprecated", "false") != "true":
                items = [i for i in items if not i["deprecated"]]
            return self._paged(req, "images", self._select(req, items))
        if len(parts) < 2:
            return None
        img = next((i for i in self.all_images(st) if str(i["id"]) == parts[1]), None)
        if img is None:
            raise h.ApiError(404, "not_found", "image with ID '%s' not found" % parts[1])
        if len(parts) == 2 and m == "GET":
            return json_response({"image": img})
        if img["type"] == "system" and m in ("PUT", "DELETE"):
            raise h.ApiError(403, "forbidden", "system images cannot be changed or deleted")
        if len(parts) == 2 and m == "PUT":
            body = h.json_body(req)
            labels = self._labels(body)
            with self.state.locked() as wst:
                obj = hz(wst)["images"][parts[1]]
                if labels is not None:
                    obj["labels"] = labels
                if isinstance(body.get("description"), str):
                    obj["description"] = body["description"]
                if body.get("type") == "snapshot":
                    obj["type"] = "snapshot"
                return json_response({"image": dict(obj)})
        if len(parts) == 2 and m == "DELETE":
            with self.state.locked() as wst:
                obj = hz(wst)["images"][parts[1]]
                if obj["protection"]["delete"]:
                    raise h.ApiError(423, "protected", "image is delete protected")
                del hz(wst)["images"][parts[1]]
            return no_content()
        return None

    def server_create_image(self, req, sid, now):
        """POST /servers/{id}/actions/create_image: a snapshot (or backup) of the server."""
        h = self._err()
        body = h.json_body(req) if req.body else {}
        kind = body.get("type", "snapshot")
        if kind not in ("snapshot", "backup"):
            raise h.invalid_field("type", "must be snapshot or backup")
        labels = self._labels(body) or {}
        with self.state.locked() as st:
            inst = self._server(sid, st)
            from .hetzner import server_type_by, SERVER_TYPES
            t = server_type_by(inst["type"]) or SERVER_TYPES[0]
            iid = st_mod._next(st, "numeric")
            base = (inst.get("extra") or {}).get("image") or inst.get("image") or ""
            img = {"id": iid, "type": kind, "status": "available", "name": None,
                   "description": body.get("description") or "%s snapshot" % inst["name"],
                   "image_size": 1.5, "disk_size": t["disk"], "created": iso8601(now),
                   "created_from": {"id": int(inst["id"]), "name": inst["name"]},
                   "bound_to": int(inst["id"]) if kind == "backup" else None,
                   "os_flavor": base.split("-")[0] or "unknown", "os_version": base.partition("-")[2] or None,
                   "rapid_deploy": False, "protection": {"delete": False}, "deprecated": None,
                   "deleted": None, "labels": labels, "architecture": t["architecture"]}
            hz(st)["images"][str(iid)] = img
            action = self._action(st, "create_image", [("server", sid), ("image", iid)], now)
            return self._action_response(action, st, image=dict(img))

    # -- SSH keys ------------------------------------------------------------------------

    @staticmethod
    def fingerprint(public_key):
        """MD5 of the key blob as colon-separated hex, as the API reports it; None when the key is
        not "TYPE BASE64 [comment]" of a known type."""
        fields = public_key.split() if isinstance(public_key, str) else []
        if len(fields) < 2 or fields[0] not in SSH_KEY_TYPES:
            return None
        try:
            blob = base64.b64decode(fields[1], validate=True)
        except ValueError:
            return None
        # The blob starts with the key type as an SSH string (RFC 4253 section 6.6).
        if len(blob) < 4 or blob[4:4 + int.from_bytes(blob[:4], "big")] != fields[0].encode():
            return None
        d = hashlib.md5(blob).hexdigest()
        return ":".join(d[i:i + 2] for i in range(0, 32, 2))

    def ssh_key_json(self, k, st=None):
        return {"id": k["id"], "name": k["name"], "fingerprint": k["fingerprint"],
                "public_key": k["public_key"], "labels": dict(k["labels"]), "created": iso8601(k["created"])}

    def create_ssh_key(self, req, now):
        h = self._err()
        body = h.json_body(req)
        name = self._name(body)
        pk = body.get("public_key")
        if pk in (None, ""):
            raise h.invalid_field("public_key", "Missing data for required field.")
        fp = self.fingerprint(pk)
        if fp is None:
            raise h.invalid_field("public_key", "invalid public key")
        labels = self._labels(body) or {}
        with self.state.locked() as st:
            t = hz(st)["ssh_keys"]
            self._taken(t, name)
            if any(k["fingerprint"] == fp for k in t.values()):
                raise h.ApiError(409, "uniqueness_error", "SSH key with the same fingerprint already exists",
                                 {"fields": [{"name": "public_key"}]})
            kid = st_mod._next(st, "numeric")
            t[str(kid)] = {"id": kid, "name": name, "fingerprint": fp, "public_key": pk.strip(),
                           "labels": labels, "created": now}
            return json_response({"ssh_key": self.ssh_key_json(t[str(kid)])}, 201)

    def ssh_key_ids(self, st, refs):
        """Server create's ssh_keys (IDs or names) as key IDs; unknown ones are an input error."""
        h = self._err()
        keys = hz_read(st)["ssh_keys"].values()
        out = []
        for ref in refs:
            k = next((k for k in keys if str(ref) in (str(k["id"]), k["name"])), None)
            if k is None:
                raise h.invalid_field("ssh_keys", "SSH key %s not found" % ref)
            out.append(str(k["id"]))
        return out

    # -- networks ------------------------------------------------------------------------

    def _network_servers(self, st, nid):
        return sorted(int(i["id"]) for i in st["instances"].values()
                      if i["platform"] == "hetzner" and not st_mod.gone(i) and
                      nid in [a["network"] for a in self.attachments(i)])

    @staticmethod
    def attachments(inst):
        """A server's private networks: [{"network", "ip", "alias_ips"}]."""
        if "private_nets" in (inst.get("extra") or {}):
            return inst["extra"]["private_nets"]
        if inst.get("private_ipv4"):
            return [{"network": inst.get("network_id") or 4711, "ip": inst["private_ipv4"], "alias_ips": []}]
        return []

    def network_json(self, n, st):
        lbs = [lb["id"] for lb in hz_read(st)["load_balancers"].values()
               if any(p["network"] == n["id"] for p in lb["private_net"])]
        return {"id": n["id"], "name": n["name"], "ip_range": n["ip_range"],
                "subnets": [dict(s) for s in n["subnets"]], "routes": [dict(r) for r in n["routes"]],
                "servers": self._network_servers(st, n["id"]), "load_balancers": lbs,
                "protection": dict(n["protection"]), "labels": dict(n["labels"]),
                "created": iso8601(n["created"]), "expose_routes_to_vswitch": n["expose_routes_to_vswitch"]}

    def _ip_range(self, value, field, within=None):
        h = self._err()
        try:
            net = ipaddress.ip_network(value, strict=True)
        except (TypeError, ValueError):
            raise h.invalid_field(field, "must be an IPv4 network in CIDR notation")
        if net.version != 4 or not net.is_private:
            raise h.invalid_field(field, "must be a private IPv4 range (RFC 1918)")
        if within is None and not 8 <= net.prefixlen <= 24:
            raise h.invalid_field(field, "network size must be between /8 and /24")
        if within is not None and not net.subnet_of(ipaddress.ip_network(within)):
            raise h.invalid_field(field, "subnet must be inside the network's ip_range %s" % within)
        return str(net)

    def _subnet(self, sub, n_range, existing):
        h = self._err()
        if not isinstance(sub, dict):
            raise h.invalid_field("subnets", "must be objects")
        kind = sub.get("type")
        if kind not in ("cloud", "server", "vswitch"):
            raise h.invalid_field("type", "must be cloud, server or vswitch")
        zone = sub.get("network_zone")
        if zone not in NETWORK_ZONES:
            raise h.invalid_field("network_zone", "unknown network zone %s" % zone)
        rng = self._ip_range(sub.get("ip_range"), "ip_range", n_range)
        if any(ipaddress.ip_network(rng).overlaps(ipaddress.ip_network(s["ip_range"])) for s in existing):
            raise h.ApiError(422, "invalid_input", "subnet %s overlaps an existing subnet" % rng,
                             {"fields": [{"name": "ip_range", "messages": ["overlaps"]}]})
        return {"type": kind, "ip_range": rng, "network_zone": zone,
                "gateway": str(next(ipaddress.ip_network(rng).hosts())),
                "vswitch_id": sub.get("vswitch_id") if kind == "vswitch" else None}

    def _route(self, r, n_range):
        h = self._err()
        if not isinstance(r, dict):
            raise h.invalid_field("routes", "must be objects")
        try:
            dest = str(ipaddress.ip_network(r.get("destination"), strict=True))
            gw = ipaddress.ip_address(r.get("gateway"))
        except (TypeError, ValueError):
            raise h.invalid_field("routes", "destination must be a network and gateway an address")
        if gw not in ipaddress.ip_network(n_range):
            raise h.invalid_field("gateway", "gateway must be inside the network")
        return {"destination": dest, "gateway": str(gw)}

    def create_network(self, req, now):
        h = self._err()
        body = h.json_body(req)
        name = self._name(body)
        rng = self._ip_range(body.get("ip_range"), "ip_range")
        labels = self._labels(body) or {}
        subs = []
        for s in body.get("subnets") or []:
            subs.append(self._subnet(s, rng, subs))
        routes = [self._route(r, rng) for r in body.get("routes") or []]
        with self.state.locked() as st:
            t = hz(st)["networks"]
            self._taken(t, name)
            nid = st_mod._next(st, "numeric")
            t[str(nid)] = {"id": nid, "name": name, "ip_range": rng, "subnets": subs, "routes": routes,
                           "labels": labels, "protection": {"delete": False},
                           "expose_routes_to_vswitch": bool(body.get("expose_routes_to_vswitch")),
                           "created": now}
            return json_response({"network": self.network_json(t[str(nid)], st)}, 201)

    def _network_action(self, req, nid, now, command, change):
        h = self._err()
        body = h.json_body(req)
        with self.state.locked() as st:
            n = hz(st)["networks"].get(str(nid))
            if n is None:
                raise h.ApiError(404, "not_found", "network with ID '%s' not found" % nid)
            change(n, body, st)
            action = self._action(st, command, [("network", nid)], now)
            return self._action_response(action, st)

    def network_add_subnet(self, req, nid, now):
        return self._network_action(req, nid, now, "add_subnet",
                                    lambda n, b, st: n["subnets"].append(self._subnet(b, n["ip_range"], n["subnets"])))

    def network_delete_subnet(self, req, nid, now):
        def change(n, b, st):
            keep = [s for s in n["subnets"] if s["ip_range"] != b.get("ip_range")]
            if len(keep) == len(n["subnets"]):
                raise self._err().invalid_field("ip_range", "no such subnet")
            n["subnets"] = keep
        return self._network_action(req, nid, now, "delete_subnet", change)

    def network_add_route(self, req, nid, now):
        return self._network_action(req, nid, now, "add_route",
                                    lambda n, b, st: n["routes"].append(self._route(b, n["ip_range"])))

    def network_delete_route(self, req, nid, now):
        def change(n, b, st):
            keep = [r for r in n["routes"] if (r["destination"], r["gateway"]) != (b.get("destination"), b.get("gateway"))]
            if len(keep) == len(n["routes"]):
                raise self._err().invalid_field("destination", "no such route")
            n["routes"] = keep
        return self._network_action(req, nid, now, "delete_route", change)

    def network_change_protection(self, req, nid, now):
        def change(n, b, st):
            if isinstance(b.get("delete"), bool):
                n["protection"]["delete"] = b["delete"]
        return self._network_action(req, nid, now, "change_protection", change)

    def _free_ip(self, st, n, want=None):
        h = self._err()
        cloud = [s for s in n["subnets"] if s["type"] in ("cloud", "server")]
        if not cloud:
            raise h.ApiError(422, "invalid_input", "network %s has no subnet for servers" % n["name"])
        used = {a["ip"] for i in st["instances"].values() if not st_mod.gone(i) for a in self.attachments(i)}
        used |= {p["ip"] for lb in hz_read(st)["load_balancers"].values() for p in lb["private_net"]}
        if want:
            ip = ipaddress.ip_address(want)
            if not any(ip in ipaddress.ip_network(s["ip_range"]) for s in cloud) or want in used:
                raise h.invalid_field("ip", "address %s is not free in the network's subnets" % want)
            return want
        for s in cloud:
            for ip in list(ipaddress.ip_network(s["ip_range"]).hosts())[1:4096]:
                if str(ip) not in used:
                    return str(ip)
        raise h.ApiError(422, "ip_not_available", "no free address in network %s" % n["name"])

    @staticmethod
    def state_network(st, nid):
        return hz(st)["networks"].get(str(nid))

    @staticmethod
    def in_network(n, ip):
        return bool(ip) and any(ipaddress.ip_address(ip) in ipaddress.ip_network(s["ip_range"])
                                for s in n["subnets"] if s["type"] in ("cloud", "server"))

    def attach(self, st, inst, nid, ip=None):
        """Attach a server (being written) to network nid."""
        h = self._err()
        n = hz(st)["networks"].get(str(nid))
        if n is None:
            raise h.invalid_field("network", "network %s not found" % nid)
        nets = [dict(a) for a in self.attachments(inst)]
        if any(a["network"] == n["id"] for a in nets):
            raise h.ApiError(422, "server_already_attached", "server is already attached to network %s" % nid)
        nets.append({"network": n["id"], "ip": self._free_ip(st, n, ip), "alias_ips": []})
        inst.setdefault("extra", {})["private_nets"] = nets
        self._sync_primary(inst)

    @staticmethod
    def _sync_primary(inst):
        nets = inst["extra"]["private_nets"]
        inst["private_ipv4"] = nets[0]["ip"] if nets else None
        inst["network_id"] = nets[0]["network"] if nets else None

    def server_attach_to_network(self, req, sid, now):
        h = self._err()
        body = h.json_body(req)
        with self.state.locked() as st:
            inst = self._server(sid, st)
            nid = body.get("network")
            if nid is None:
                raise h.invalid_field("network", "Missing data for required field.")
            self.attach(st, inst, nid, body.get("ip"))
            action = self._action(st, "attach_to_network", [("server", sid), ("network", nid)], now)
            return self._action_response(action, st)

    def server_detach_from_network(self, req, sid, now):
        h = self._err()
        body = h.json_body(req)
        with self.state.locked() as st:
            inst = self._server(sid, st)
            nets = [dict(a) for a in self.attachments(inst)]
            keep = [a for a in nets if str(a["network"]) != str(body.get("network"))]
            if len(keep) == len(nets):
                raise h.ApiError(422, "server_not_attached", "server is not attached to network %s" % body.get("network"))
            inst.setdefault("extra", {})["private_nets"] = keep
            self._sync_primary(inst)
            action = self._action(st, "detach_from_network", [("server", sid), ("network", body["network"])], now)
            return self._action_response(action, st)

    # -- placement groups ----------------------------------------------------------------

    def _group_servers(self, st, gid):
        return sorted(int(i["id"]) for i in st["instances"].values()
                      if i["platform"] == "hetzner" and not st_mod.gone(i) and
                      (i.get("extra") or {}).get("placement_group") == gid)

    def placement_group_json(self, g, st):
        return {"id": g["id"], "name": g["name"], "type": g["type"], "labels": dict(g["labels"]),
                "servers": self._group_servers(st, g["id"]), "created": iso8601(g["created"])}

    def create_placement_group(self, req, now):
        h = self._err()
        body = h.json_body(req)
        name = self._name(body)
        if body.get("type") != "spread":
            raise h.invalid_field("type", "must be spread")
        labels = self._labels(body) or {}
        with self.state.locked() as st:
            t = hz(st)["placement_groups"]
            self._taken(t, name)
            gid = st_mod._next(st, "numeric")
            t[str(gid)] = {"id": gid, "name": name, "type": "spread", "labels": labels, "created": now}
            return json_response({"placement_group": self.placement_group_json(t[str(gid)], st),
                                  "action": None}, 201)

    def place(self, st, inst, gref):
        """Put a server (being written) into a spread group: at most 10 servers per group."""
        h = self._err()
        g = next((g for g in hz(st)["placement_groups"].values() if str(gref) in (str(g["id"]), g["name"])), None)
        if g is None:
            raise h.invalid_field("placement_group", "placement group %s not found" % gref)
        if len(self._group_servers(st, g["id"])) >= 10:
            raise h.ApiError(412, "placement_error", "spread placement group %s is full" % g["name"])
        inst.setdefault("extra", {})["placement_group"] = g["id"]

    def server_add_to_placement_group(self, req, sid, now):
        h = self._err()
        body = h.json_body(req)
        with self.state.locked() as st:
            inst = self._server(sid, st)
            if inst["status"] != "stopped":
                raise h.ApiError(422, "server_not_stopped", "the action requires a stopped server")
            if (inst.get("extra") or {}).get("placement_group"):
                raise h.ApiError(422, "already_in_placement_group", "server is already in a placement group")
            self.place(st, inst, body.get("placement_group"))
            action = self._action(st, "add_to_placement_group", [("server", sid)], now)
            return self._action_response(action, st)

    def server_remove_from_placement_group(self, req, sid, now):
        with self.state.locked() as st:
            inst = self._server(sid, st)
            (inst.get("extra") or {}).pop("placement_group", None)
            action = self._action(st, "remove_from_placement_group", [("server", sid)], now)
            return self._action_response(action, st)

    # -- load balancers ------------------------------------------------------------------

    def lb_type_json(self, t):
        from .hetzner import LOCATIONS
        return dict(t, deprecated=None, deprecation=None,
                    prices=[{"location": loc["name"], "price_hourly": price("0.0098000000", "0.0116620000"),
                             "price_monthly": price("5.3900000000", "6.4141000000"),
                             "included_traffic": 21990232555520,
                             "price_per_tb_traffic": price("1.0000000000", "1.1900000000")}
                            for loc in LOCATIONS])

    def load_balancer_json(self, lb, st):
        from .hetzner import location_by
        t = next(t for t in LB_TYPES if t["id"] == lb["type"])
        ip4 = lb["public_ipv4"]
        return {"id": lb["id"], "name": lb["name"],
                "public_net": {"enabled": lb["public_enabled"],
                               "ipv4": {"ip": ip4, "dns_ptr": "static.%s.clients.your-server.de" % ip4},
                               "ipv6": {"ip": lb["public_ipv6"], "dns_ptr": "static.clients.your-server.de"}},
                "private_net": [dict(p) for p in lb["private_net"]],
                "location": location_by(lb["location"]), "load_balancer_type": self.lb_type_json(t),
                "protection": dict(lb["protection"]), "labels": dict(lb["labels"]),
                "targets": [self._target_json(tg, st, lb["services"]) for tg in lb["targets"]],
                "services": [dict(s) for s in lb["services"]], "algorithm": {"type": lb["algorithm"]},
                "outgoing_traffic": 0, "ingoing_traffic": 0, "included_traffic": 21990232555520,
                "created": iso8601(lb["created"])}

    def _target_json(self, tg, st, lb_services):
        out = dict(tg)
        if tg["type"] == "server":
            inst = st["instances"].get(str(tg["server"]["id"]))
            healthy = "healthy" if inst and inst["status"] == "running" and not st_mod.gone(inst) else "unhealthy"
            out["health_status"] = [{"listen_port": s["listen_port"], "status": healthy}
                                    for s in lb_services]
        if tg["type"] == "label_selector":
            from .hetzner import parse_selector
            pred = parse_selector(tg["label_selector"]["selector"])
            out["targets"] = [{"type": "server", "server": {"id": int(i["id"])}, "use_private_ip": tg["use_private_ip"],
                               "health_status": []}
                              for i in st["instances"].values()
                              if i["platform"] == "hetzner" and not st_mod.gone(i) and pred(i.get("labels") or {})]
        return out

    def create_load_balancer(self, req, now):
        from .hetzner import location_by
        h = self._err()
        body = h.json_body(req)
        name = self._name(body)
        tref = body.get("load_balancer_type")
        t = next((t for t in LB_TYPES if str(tref) in (t["name"], str(t["id"]))), None)
        if t is None:
            raise h.invalid_field("load_balancer_type", "load balancer type %s not found" % tref)
        if body.get("location") and body.get("network_zone"):
            raise h.invalid_field("location", "location and network_zone are mutually exclusive")
        loc = location_by(body.get("location") or "fsn1")
        if loc is None:
            raise h.invalid_field("location", "location %s not found" % body.get("location"))
        algo = (body.get("algorithm") or {}).get("type", "round_robin")
        if algo not in ("round_robin", "least_connections"):
            raise h.invalid_field("algorithm", "must be round_robin or least_connections")
        labels = self._labels(body) or {}
        with self.state.locked() as st:
            tbl = hz(st)["load_balancers"]
            self._taken(tbl, name)
            lid = st_mod._next(st, "numeric")
            n = lid % 250 + 1
            lb = {"id": lid, "name": name, "type": t["id"], "location": loc["name"], "algorithm": algo,
                  "labels": labels, "protection": {"delete": False}, "created": now,
                  "public_enabled": body.get("public_interface", True) is not False,
                  "public_ipv4": st["settings"].get("hetzner_lb_public_ipv4") or "198.51.100.%d" % n,
                  "public_ipv6": "2001:db8:1::%x" % n,
                  "private_net": [], "targets": [], "services": []}
            tbl[str(lid)] = lb
            if body.get("network"):
                self._lb_attach(st, lb, body["network"], None)
            for s in body.get("services") or []:
                lb["services"].append(self._service(s, lb))
            for tg in body.get("targets") or []:
                lb["targets"].append(self._target(st, tg, lb))
            action = self._action(st, "create_load_balancer", [("load_balancer", lid)], now)
            return self._action_response(action, st, load_balancer=self.load_balancer_json(lb, st))

    def _service(self, s, lb, replace=False):
        h = self._err()
        if not isinstance(s, dict):
            raise h.invalid_field("services", "must be objects")
        proto = s.get("protocol")
        if proto not in ("tcp", "http", "https"):
            raise h.invalid_field("protocol", "must be tcp, http or https")
        port = s.get("listen_port") or {"http": 80, "https": 443}.get(proto)
        dport = s.get("destination_port") or port
        for f, v in (("listen_port", port), ("destination_port", dport)):
            if not isinstance(v, int) or not 1 <= v <= 65535:
                raise h.invalid_field(f, "must be a port number")
        if not replace and any(x["listen_port"] == port for x in lb["services"]):
            raise h.ApiError(409, "source_port_already_used", "listen port %d is already used" % port)
        hc = s.get("health_check") or {}
        return {"protocol": proto, "listen_port": port, "destination_port": dport,
                "proxyprotocol": bool(s.get("proxyprotocol")),
                "health_check": {"protocol": hc.get("protocol", "tcp"), "port": hc.get("port", dport),
                                 "interval": hc.get("interval", 15), "timeout": hc.get("timeout", 10),
                                 "retries": hc.get("retries", 3), "http": hc.get("http")},
                "http": dict({"cookie_name": "HCLBSTICKY", "cookie_lifetime": 300, "certificates": [],
                              "redirect_http": False, "sticky_sessions": False, "timeout_idle": 60},
                             **(s.get("http") or {})) if proto != "tcp" else None}

    def _target(self, st, tg, lb):
        h = self._err()
        kind = tg.get("type") if isinstance(tg, dict) else None
        use_private = bool(tg.get("use_private_ip")) if kind else False
        if kind == "server":
            sid = (tg.get("server") or {}).get("id")
            self._server(str(sid), st)
            if any(x["type"] == "server" and x["server"]["id"] == sid for x in lb["targets"]):
                raise h.ApiError(409, "target_already_defined", "server %s is already a target" % sid)
            return {"type": "server", "server": {"id": sid}, "use_private_ip": use_private}
        if kind == "label_selector":
            sel = (tg.get("label_selector") or {}).get("selector")
            if not isinstance(sel, str) or not sel:
                raise h.invalid_field("label_selector", "Missing data for required field.")
            return {"type": "label_selector", "label_selector": {"selector": sel}, "use_private_ip": use_private}
        if kind == "ip":
            return {"type": "ip", "ip": {"ip": (tg.get("ip") or {}).get("ip")}}
        raise h.invalid_field("type", "must be server, label_selector or ip")

    def _lb_change(self, lid, now, command, change):
        h = self._err()
        with self.state.locked() as st:
            lb = hz(st)["load_balancers"].get(str(lid))
            if lb is None:
                raise h.ApiError(404, "not_found", "load balancer with ID '%s' not found" % lid)
            change(lb, st)
            action = self._action(st, command, [("load_balancer", lid)], now)
            return self._action_response(action, st)

    def load_balancer_add_target(self, req, lid, now):
        body = self._err().json_body(req)
        return self._lb_change(lid, now, "add_target", lambda lb, st: lb["targets"].append(self._target(st, body, lb)))

    def load_balancer_remove_target(self, req, lid, now):
        body = self._err().json_body(req)

        def change(lb, st):
            def same(x):
                if x["type"] != body.get("type"):
                    return False
                if x["type"] == "server":
                    return x["server"]["id"] == (body.get("server") or {}).get("id")
                if x["type"] == "label_selector":
                    return x["label_selector"] == body.get("label_selector")
                return x["ip"] == body.get("ip")
            keep = [x for x in lb["targets"] if not same(x)]
            if len(keep) == len(lb["targets"]):
                raise self._err().ApiError(404, "target_not_found", "no such target")
            lb["targets"] = keep
        return self._lb_change(lid, now, "remove_target", change)

    def load_balancer_add_service(self, req, lid, now):
        body = self._err().json_body(req)
        return self._lb_change(lid, now, "add_service", lambda lb, st: lb["services"].append(self._service(body, lb)))

    def load_balancer_update_service(self, req, lid, now):
        body = self._err().json_body(req)

        def change(lb, st):
            old = next((s for s in lb["services"] if s["listen_port"] == body.get("listen_port")), None)
            if old is None:
                raise self._err().ApiError(404, "service_not_found", "no service on that listen port")
            merged = dict(old, **{k: v for k, v in body.items() if v is not None})
            lb["services"][lb["services"].index(old)] = self._service(merged, lb, replace=True)
        return self._lb_change(lid, now, "update_service", change)

    def load_balancer_delete_service(self, req, lid, now):
        body = self._err().json_body(req)

        def change(lb, st):
            keep = [s for s in lb["services"] if s["listen_port"] != body.get("listen_port")]
            if len(keep) == len(lb["services"]):
                raise self._err().ApiError(404, "service_not_found", "no service on that listen port")
            lb["services"] = keep
        return self._lb_change(lid, now, "delete_service", change)

    def load_balancer_change_algorithm(self, req, lid, now):
        body = self._err().json_body(req)

        def change(lb, st):
            if body.get("type") not in ("round_robin", "least_connections"):
                raise self._err().invalid_field("type", "must be round_robin or least_connections")
            lb["algorithm"] = body["type"]
        return self._lb_change(lid, now, "change_algorithm", change)

    def _lb_attach(self, st, lb, nid, ip):
        h = self._err()
        n = hz(st)["networks"].get(str(nid))
        if n is None:
            raise h.invalid_field("network", "network %s not found" % nid)
        if any(p["network"] == n["id"] for p in lb["private_net"]):
            raise h.ApiError(422, "load_balancer_already_attached", "already attached to network %s" % nid)
        lb["private_net"].append({"network": n["id"], "ip": self._free_ip(st, n, ip)})

    def load_balancer_attach_to_network(self, req, lid, now):
        body = self._err().json_body(req)
        return self._lb_change(lid, now, "attach_to_network",
                               lambda lb, st: self._lb_attach(st, lb, body.get("network"), body.get("ip")))

    def load_balancer_detach_from_network(self, req, lid, now):
        body = self._err().json_body(req)

        def change(lb, st):
            lb["private_net"] = [p for p in lb["private_net"] if str(p["network"]) != str(body.get("network"))]
        return self._lb_change(lid, now, "detach_from_network", change)

    def load_balancer_enable_public_interface(self, req, lid, now):
        return self._lb_change(lid, now, "enable_public_interface", lambda lb, st: lb.update(public_enabled=True))

    def load_balancer_disable_public_interface(self, req, lid, now):
        return self._lb_change(lid, now, "disable_public_interface", lambda lb, st: lb.update(public_enabled=False))

    def load_balancer_change_protection(self, req, lid, now):
        body = self._err().json_body(req)

        def change(lb, st):
            if isinstance(body.get("delete"), bool):
                lb["protection"]["delete"] = body["delete"]
        return self._lb_change(lid, now, "change_protection", change)
