"""OpenStack Octavia v2 (/load-balancer), in the Keystone catalog as service type "load-balancer"
only while the setting openstack_octavia is true (so that a cloud without Octavia stays tested).
The shapes of the API reference as openstacksdk, gophercloud and python-octaviaclient read them:
load balancers (the VIP allocated on vip_subnet_id or vip_network_id, its Neutron port listed by
the fake Neutron with device_owner "Octavia" so a floating IP can be associated with it),
listeners, pools, members and health monitors; list filters (any field, tags as all-of),
/v2/ and /v2.0/ prefixes. Every change puts the object (PENDING_CREATE, PENDING_UPDATE,
PENDING_DELETE) and its load balancer (PENDING_UPDATE) in a pending state for the setting
octavia_pending_seconds, during which any change under that load balancer answers 409 as Octavia
does ("... is immutable and cannot be updated."); then ACTIVE, or gone. DELETE of a load balancer
with children is refused without ?cascade=true and removes everything under it with it.

State lives in state["octavia"] (table -> id -> object as the API shows it, plus the pending
deadline in "_until")."""
import ipaddress
import time
import uuid

from .openstack_services import neutron_read, token_project, unauthorized
from .web import Response, iso8601z, json_response

TABLES = ("loadbalancers", "listeners", "pools", "members", "healthmonitors")
SINGULAR = {"loadbalancers": "loadbalancer", "listeners": "listener", "pools": "pool", "members": "member",
            "healthmonitors": "healthmonitor"}
TITLE = {"loadbalancers": "Load Balancer", "listeners": "Listener", "pools": "Pool", "members": "Member",
         "healthmonitors": "Health Monitor"}
LIST_PARAMS = ("limit", "marker", "page_reverse", "sort", "sort_key", "sort_dir", "fields")
ALGORITHMS = ("ROUND_ROBIN", "LEAST_CONNECTIONS", "SOURCE_IP", "SOURCE_IP_PORT")
PROTOCOLS = ("TCP", "HTTP", "HTTPS", "UDP", "TERMINATED_HTTPS", "PROXY", "PROXYV2", "SCTP")


def fault(status, message):
    return json_response({"faultcode": "Client" if status < 500 else "Server", "faultstring": message,
                          "debuginfo": None}, status)


def octavia_write(st):
    o = st.setdefault("octavia", {})
    for t in TABLES:
        o.setdefault(t, {})
    return o


def vip_ports(st):
    """The Neutron ports of the load balancers' VIPs."""
    out = []
    now = time.time()
    for lb in ((st.get("octavia") or {}).get("loadbalancers") or {}).values():
        if lb["provisioning_status"] == "PENDING_DELETE" and lb["_until"] <= now:
            continue
        out.append({"id": lb["vip_port_id"], "name": "octavia-lb-" + lb["id"], "network_id": lb["vip_network_id"],
                    "mac_address": "fa:16:3e:%s:%s:%s" % (lb["id"][0:2], lb["id"][2:4], lb["id"][4:6]),
                    "fixed_ips": [{"subnet_id": lb["vip_subnet_id"], "ip_address": lb["vip_address"]}],
                    "device_id": "lb-" + lb["id"], "device_owner": "Octavia", "status": "DOWN",
                    "admin_state_up": False, "tenant_id": lb["project_id"], "project_id": lb["project_id"],
                    "security_groups": [], "binding:vnic_type": "normal", "port_security_enabled": True,
                    "allowed_address_pairs": [], "extra_dhcp_opts": [], "description": "", "tags": [],
                    "created_at": lb["created_at"], "updated_at": lb["updated_at"], "revision_number": 1})
    return out


def settle(o, now):
    """Pending states whose time is up become ACTIVE, or the object goes."""
    for t in TABLES:
        for oid in list(o[t]):
            obj = o[t].get(oid)
            if obj is None or not obj["provisioning_status"].startswith("PENDING_") or obj["_until"] > now:
                continue
            if obj["provisioning_status"] == "PENDING_DELETE":
                remove(o, t, oid)
                continue
            obj["provisioning_status"] = "ACTIVE"
            obj["operating_status"] = "NO_MONITOR" if t == "members" else "ONLINE"
            obj["updated_at"] = iso8601z(now)


def remove(o, table, oid):
    obj = o[table].pop(oid, None)
    if obj is None:
        return
    ref = {"id": oid}
    for t in TABLES:
        for other in o[t].values():
            for key in ("listeners", "pools", "members", "loadbalancers"):
                if isinstance(other.get(key), list) and ref in other[key]:
                    other[key].remove(ref)
            if other.get("default_pool_id") == oid:
                other["default_pool_id"] = None
            if other.get("healthmonitor_id") == oid:
                other["healthmonitor_id"] = None


def public(obj):
    return {k: v for k, v in obj.items() if not k.startswith("_")}


class Octavia:
    def __init__(self, state):
        self.state = state

    def handle(self, req):
        parts = [p for p in req.path.split("/") if p][1:]
        base = req.base_url + "/load-balancer"
        if not parts:
            return json_response({"versions": [
                {"id": "v2.0", "status": "SUPPORTED", "updated": "2016-12-11T00:00:00Z",
                 "links": [{"href": base + "/v2.0/", "rel": "self"}]},
                {"id": "v2.27", "status": "CURRENT", "updated": "2023-05-05T00:00:00Z",
                 "links": [{"href": base + "/v2/", "rel": "self"}]}]})
        project = token_project(self.state, req)
        if project is None:
            return unauthorized()
        if parts[0] not in ("v2", "v2.0") or parts[1:2] != ["lbaas"] or len(parts) < 3:
            return fault(404, "The resource could not be found.")
        parts = parts[2:]
        table = parts[0]
        if table not in TABLES or table == "members":
            return fault(404, "The resource could not be found.")
        if table == "pools" and len(parts) >= 3 and parts[2] == "members":
            return self.route(req, "members", parts[3:], project, parent=parts[1])
        return self.route(req, table, parts[1:], project)

    def route(self, req, table, rest, project, parent=None):
        m = req.method
        now = time.time()
        with self.state.locked() as st:
            o = octavia_write(st)
            settle(o, now)
            if parent is not None and parent not in o["pools"]:
                return fault(404, "Pool %s could not be found." % parent)
            if not rest and m == "GET":
                items = [public(x) for x in o[table].values() if parent is None or x["_pool"] == parent]
                items = self.filter(req, items)
                items.sort(key=lambda x: (x["created_at"], x["id"]))
                return json_response({table: items, table + "_links": []})
            if not rest and m == "POST":
                try:
                    body = req.json()[SINGULAR[table]]
                    if not isinstance(body, dict):
                        raise TypeError
                except (ValueError, KeyError, TypeError):
                    return fault(400, "Invalid input for field/attribute %s. Value: None. Mandatory field missing."
                                 % SINGULAR[table])
                return self.create(st, o, table, body, project, now, parent)
            if len(rest) != 1:
                return fault(405, "Method not allowed.")
            obj = o[table].get(rest[0])
            if obj is None or (parent is not None and obj["_pool"] != parent):
                return fault(404, "%s %s could not be found." % (TITLE[table], rest[0]))
            if m == "GET":
                return json_response({SINGULAR[table]: public(obj)})
            if m == "PUT":
                try:
                    body = req.json()[SINGULAR[table]]
                    if not isinstance(body, dict):
                        raise TypeError
                except (ValueError, KeyError, TypeError):
                    return fault(400, "Invalid input for field/attribute %s." % SINGULAR[table])
                return self.update(st, o, table, obj, body, now)
            if m == "DELETE":
                return self.delete(req, st, o, table, obj, now)
        return fault(405, "Method not allowed.")

    @staticmethod
    def filter(req, items):
        for key, vals in req.query_all.items():
            if key in LIST_PARAMS:
                continue
            if key in ("loadbalancer_id", "pool_id"):
                plural = key.replace("_id", "s")
                items = [i for i in items if any({"id": v} in (i.get(plural) or []) for v in vals)]
                continue
            if key in ("tags", "tags-any"):
                want = [t for v in vals for t in v.split(",") if t]
                pick = all if key == "tags" else any
                items = [i for i in items if pick(t in (i.get("tags") or []) for t in want)]
                continue
            items = [i for i in items if str(i.get(key)).lower() in [v.lower() for v in vals]
                     or (isinstance(i.get(key), bool) and str(i.get(key)).lower() in [v.lower() for v in vals])]
        return items

    def pending(self, o, lb_id, _st=None):
        """409 when the load balancer is not ACTIVE, else None."""
        lb = o["loadbalancers"].get(lb_id)
        if lb is None:
            return fault(404, "Load Balancer %s could not be found." % lb_id)
        if lb["provisioning_status"] != "ACTIVE":
            return fault(409, "Load Balancer %s is immutable and cannot be updated." % lb_id)
        return None

    @staticmethod
    def hold(st):
        return float(st["settings"].get("octavia_pending_seconds", 0.5))

    def touch(self, st, o, lb_id, now):
        lb = o["loadbalancers"][lb_id]
        lb["provisioning_status"] = "PENDING_UPDATE"
        lb["_until"] = now + self.hold(st)
        lb["updated_at"] = iso8601z(now)

    def base(self, oid, body, project, now, st):
        tags = body.get("tags") or []
        return {"id": oid, "name": body.get("name") or "", "description": body.get("description") or "",
                "admin_state_up": body.get("admin_state_up", True) is not False, "project_id": project,
                "tenant_id": project, "provisioning_status": "PENDING_CREATE", "operating_status": "OFFLINE",
                "created_at": iso8601z(now), "updated_at": None, "tags": list(tags), "_until": now + self.hold(st)}

    def create(self, st, o, table, body, project, now, parent):
        for key in ("name", "description"):
            if not isinstance(body.get(key, ""), str) or len(body.get(key) or "") > 255:
                return fault(400, "Invalid input for field/attribute %s." % key)
        if not isinstance(body.get("tags", []), list) or not all(isinstance(x, str) for x in body.get("tags", [])):
            return fault(400, "Invalid input for field/attribute tags.")
        oid = str(uuid.uuid4())
        obj = self.base(oid, body, project, now, st)
        if table == "loadbalancers":
            ns = neutron_read(st)
            sub = ns["subnets"].get(body.get("vip_subnet_id") or "")
            if sub is None and body.get("vip_network_id"):
                sub = next((s for s in ns["subnets"].values() if s["network_id"] == body["vip_network_id"]
                            and s["ip_version"] == 4), None)
            if sub is None:
                return fault(400, "Validation failure: VIP must contain one of: vip_port_id, vip_network_id, "
                             "vip_subnet_id.")
            used = {lb["vip_address"] for lb in o["loadbalancers"].values()}
            net = ipaddress.ip_network(sub["cidr"])
            addr = next(str(net[-2 - k]) for k in range(1000) if str(net[-2 - k]) not in used)
            obj.update(vip_address=addr, vip_port_id=str(uuid.uuid4()), vip_subnet_id=sub["id"],
                       vip_network_id=sub["network_id"], vip_qos_policy_id=None, vip_vnic_type="normal",
                       additional_vips=[], flavor_id=None, provider=body.get("provider") or "amphora",
                       availability_zone=body.get("availability_zone"), listeners=[], pools=[])
        elif table == "listeners":
            lb_id = body.get("loadbalancer_id")
            if body.get("protocol") not in PROTOCOLS or not isinstance(body.get("protocol_port"), int) or \
                    not 1 <= body["protocol_port"] <= 65535:
                return fault(400, "Invalid input for field/attribute protocol_port.")
            err = self.pending(o, lb_id, st)
            if err:
                return err
            if any(x["protocol_port"] == body["protocol_port"] and {"id": lb_id} in x["loadbalancers"]
                   for x in o["listeners"].values()):
                return fault(409, "Another Listener on this Load Balancer is already using protocol_port %d"
                             % body["protocol_port"])
            obj.update(protocol=body["protocol"], protocol_port=body["protocol_port"],
                       connection_limit=body.get("connection_limit", -1), default_pool_id=None,
                       default_tls_container_ref=None, sni_container_refs=[], l7policies=[], insert_headers={},
                       loadbalancers=[{"id": lb_id}], timeout_client_data=body.get("timeout_client_data", 50000),
                       timeout_member_connect=body.get("timeout_member_connect", 5000),
                       timeout_member_data=body.get("timeout_member_data", 50000),
                       timeout_tcp_inspect=body.get("timeout_tcp_inspect", 0), client_ca_tls_container_ref=None,
                       client_authentication="NONE", client_crl_container_ref=None,
                       allowed_cidrs=body.get("allowed_cidrs"), tls_ciphers=None, tls_versions=None,
                       alpn_protocols=None, _lb=lb_id)
            o["loadbalancers"][lb_id]["listeners"].append({"id": oid})
        elif table == "pools":
            listener = o["listeners"].get(body.get("listener_id") or "")
            lb_id = body.get("loadbalancer_id") or (listener or {}).get("_lb")
            if body.get("listener_id") and listener is None:
                return fault(404, "Listener %s could not be found." % body["listener_id"])
            if body.get("lb_algorithm") not in ALGORITHMS:
                return fault(400, "Invalid input for field/attribute lb_algorithm. Value: '%s'."
                             % body.get("lb_algorithm"))
            if body.get("protocol") not in PROTOCOLS:
                return fault(400, "Invalid input for field/attribute protocol.")
            err = self.pending(o, lb_id, st)
            if err:
                return err
            obj.update(protocol=body["protocol"], lb_algorithm=body["lb_algorithm"],
                       session_persistence=body.get("session_persistence"), loadbalancers=[{"id": lb_id}],
                       listeners=[{"id": listener["id"]}] if listener else [], members=[], healthmonitor_id=None,
                       tls_enabled=False, tls_ciphers=None, tls_versions=None, alpn_protocols=None,
                       ca_tls_container_ref=None, crl_container_ref=None, tls_container_ref=None, _lb=lb_id)
            o["loadbalancers"][lb_id]["pools"].append({"id": oid})
            if listener:
                listener["default_pool_id"] = oid
        elif table == "members":
            pool = o["pools"][parent]
            lb_id = pool["_lb"]
            try:
                ipaddress.ip_address(body.get("address") or "")
            except ValueError:
                return fault(400, "Invalid input for field/attribute address.")
            if not isinstance(body.get("protocol_port"), int) or not 1 <= body["protocol_port"] <= 65535:
                return fault(400, "Invalid input for field/attribute protocol_port.")
            err = self.pending(o, lb_id, st)
            if err:
                return err
            if any(x["address"] == body["address"] and x["protocol_port"] == body["protocol_port"]
                   for x in o["members"].values() if x["_pool"] == parent):
                return fault(409, "Duplicate member %s:%d in pool %s"
                             % (body["address"], body["protocol_port"], parent))
            obj.update(address=body["address"], protocol_port=body["protocol_port"], weight=body.get("weight", 1),
                       backup=bool(body.get("backup")), subnet_id=body.get("subnet_id"),
                       monitor_address=body.get("monitor_address"), monitor_port=body.get("monitor_port"),
                       vnic_type="normal", _pool=parent, _lb=lb_id)
            pool["members"].append({"id": oid})
        else:
            pool = o["pools"].get(body.get("pool_id") or "")
            if pool is None:
                return fault(404, "Pool %s could not be found." % body.get("pool_id"))
            if body.get("type") not in ("HTTP", "HTTPS", "PING", "TCP", "TLS-HELLO", "UDP-CONNECT", "SCTP"):
                return fault(400, "Invalid input for field/attribute type.")
            for key in ("delay", "timeout", "max_retries"):
                if not isinstance(body.get(key), int):
                    return fault(400, "Invalid input for field/attribute %s." % key)
            if pool["healthmonitor_id"]:
                return fault(409, "This pool already has a health monitor")
            err = self.pending(o, pool["_lb"], st)
            if err:
                return err
            http = body["type"] in ("HTTP", "HTTPS")
            obj.update(type=body["type"], delay=body["delay"], timeout=body["timeout"],
                       max_retries=body["max_retries"], max_retries_down=body.get("max_retries_down", 3),
                       http_method=body.get("http_method", "GET") if http else None,
                       url_path=body.get("url_path", "/") if http else None,
                       expected_codes=body.get("expected_codes", "200") if http else None,
                       http_version=None, domain_name=None, pools=[{"id": pool["id"]}], _lb=pool["_lb"])
            pool["healthmonitor_id"] = oid
        o[table][oid] = obj
        if table != "loadbalancers":
            self.touch(st, o, obj["_lb"], now)
        return json_response({SINGULAR[table]: public(obj)}, 201)

    def update(self, st, o, table, obj, body, now):
        lb_id = obj["id"] if table == "loadbalancers" else obj["_lb"]
        err = self.pending(o, lb_id, None)
        if err:
            return err
        for key in ("name", "description", "admin_state_up", "tags", "lb_algorithm", "weight", "delay", "timeout",
                    "max_retries"):
            if key in body:
                if key == "lb_algorithm" and body[key] not in ALGORITHMS:
                    return fault(400, "Invalid input for field/attribute lb_algorithm.")
                obj[key] = body[key]
        until = now + self.hold(st)
        obj["provisioning_status"] = "PENDING_UPDATE"
        obj["_until"] = until
        obj["updated_at"] = iso8601z(now)
        if table != "loadbalancers":
            lb = o["loadbalancers"][lb_id]
            lb.update(provisioning_status="PENDING_UPDATE", _until=until, updated_at=iso8601z(now))
        return json_response({SINGULAR[table]: public(obj)})

    def delete(self, req, st, o, table, obj, now):
        lb_id = obj["id"] if table == "loadbalancers" else obj["_lb"]
        lb = o["loadbalancers"][lb_id]
        if table == "loadbalancers" and obj["provisioning_status"] == "PENDING_DELETE":
            return fault(409, "Invalid state PENDING_DELETE of loadbalancer resource %s" % lb_id)
        err = self.pending(o, lb_id, None)
        if err:
            return err
        until = now + self.hold(st)
        if table == "loadbalancers":
            cascade = str(req.query.get("cascade", "")).lower() in ("true", "1")
            children = [(t, x) for t in TABLES[1:] for x in o[t].values() if x.get("_lb") == lb_id]
            if children and not cascade:
                return fault(400, "Validation failure: Cannot delete Load Balancer %s - it has children" % lb_id)
            for _, x in children:
                x.update(provisioning_status="PENDING_DELETE", _until=until)
        if table == "pools":
            for x in list(o["members"].values()) + list(o["healthmonitors"].values()):
                if x.get("_pool") == obj["id"] or {"id": obj["id"]} in (x.get("pools") or []):
                    x.update(provisioning_status="PENDING_DELETE", _until=until)
        obj.update(provisioning_status="PENDING_DELETE", _until=until)
        if table != "loadbalancers":
            lb.update(provisioning_status="PENDING_UPDATE", _until=until, updated_at=iso8601z(now))
        return Response(204, b"", None)
