"""Azure: the Entra ID token endpoint (client credentials with a client secret, v2.0) and Azure
Resource Manager for virtual machines and their network interfaces and public IP addresses:
VM get (with $expand=instanceView) and list (value/nextLink pages), start, powerOff, deallocate,
delete and tags (PATCH); NICs and public IPs get. Every ARM request needs a bearer token this fake
issued (here or at the managed identity endpoint of IMDS, metadata.py) for the ARM resource;
tokens expire after `azure_token_ttl` seconds. api-version is required and checked per resource
type. Errors are ARM's {"error": {"code", "message"}}; beyond `azure_arm_reads_per_second` (0: no
limit) reads get ARM's 429 with Retry-After.

Routes: /aad/<tenant>/oauth2/v2.0/token (the authority host), /arm/subscriptions/... (the
resource manager endpoint)."""
import time
import urllib.parse

from . import state as st_mod
from .metadata import AZURE_SUBSCRIPTION
from .state import StateError
from .web import json_response

RESOURCE_GROUP = "cloudnode-rg"
TENANT = "72f988bf-86f1-41af-91ab-2d7cd011db47"
COMPUTE_APIS = ("2022-08-01", "2022-11-01", "2023-03-01", "2023-07-01", "2023-09-01", "2024-03-01")
NETWORK_APIS = ("2022-07-01", "2022-09-01", "2023-02-01", "2023-04-01", "2023-05-01", "2023-09-01")
POWER = {"running": "running", "stopped": "stopped", "deallocated": "deallocated"}


def arm_error(status, code, message, headers=None):
    return json_response({"error": {"code": code, "message": message}}, status, "application/json; charset=utf-8",
                         headers=headers)


def issue_token(state, subject, resource):
    ttl = int(state.read()["settings"]["azure_token_ttl"])
    now = int(time.time())
    tok = state.sign("azure", {"sub": subject, "aud": resource.rstrip("/")}, ttl)
    return {"token_type": "Bearer", "expires_in": ttl, "ext_expires_in": ttl, "access_token": tok,
            "expires_on": now + ttl, "resource": resource}


class Api:
    def __init__(self, state):
        self.state = state

    # -- Entra ID ------------------------------------------------------------------------

    def token(self, req, tenant):
        if req.method != "POST":
            return json_response({"error": "invalid_request"}, 405)
        form = dict(urllib.parse.parse_qsl(req.body.decode("utf-8", "replace")))
        apps = {a["client_id"]: a for a in self.state.read()["settings"]["azure_service_principals"]}
        app = apps.get(form.get("client_id"))
        if form.get("grant_type") != "client_credentials":
            return self.aad_error(400, "unsupported_grant_type", "AADSTS70003: The app requested an unsupported grant "
                                  "type.")
        if tenant != TENANT:
            return self.aad_error(400, "invalid_request", "AADSTS90002: Tenant '%s' not found." % tenant)
        if app is None:
            return self.aad_error(400, "unauthorized_client", "AADSTS700016: Application with identifier '%s' was "
                                  "not found in the directory." % form.get("client_id"))
        if form.get("client_secret") != app["secret"]:
            return self.aad_error(401, "invalid_client", "AADSTS7000215: Invalid client secret provided.")
        scope = form.get("scope") or ""
        if not scope.endswith("/.default"):
            return self.aad_error(400, "invalid_scope", "AADSTS70011: The provided value for the input parameter "
                                  "'scope' is not valid.")
        tok = issue_token(self.state, app["client_id"], scope[:-len(".default")])
        return json_response({k: tok[k] for k in ("token_type", "expires_in", "ext_expires_in", "access_token")})

    @staticmethod
    def aad_error(status, err, description):
        return json_response({"error": err, "error_description": description, "error_codes": [int(description[6:description.index(":")])],
                              "timestamp": time.strftime("%Y-%m-%d %H:%M:%SZ", time.gmtime())}, status)

    # -- Resource Manager ------------------------------------------------------------------

    def handle(self, req):
        if req.path.startswith("/aad/"):
            parts = req.path.split("/")
            if len(parts) == 6 and parts[3:] == ["oauth2", "v2.0", "token"]:
                return self.token(req, parts[2])
            return json_response({"error": "not_found"}, 404)
        auth = req.header("Authorization") or ""
        if not auth.startswith("Bearer "):
            return arm_error(401, "AuthenticationFailed", "Authentication failed. The 'Authorization' header is "
                             "missing.", headers=[("WWW-Authenticate", 'Bearer authorization_uri="%s/aad/%s", '
                                                   'error="invalid_token"' % (req.base_url, TENANT))])
        claims = self.state.verify("azure", auth[len("Bearer "):].strip())
        if claims is None:
            return arm_error(401, "InvalidAuthenticationToken", "The access token is invalid or has expired.",
                             headers=[("WWW-Authenticate", 'Bearer error="invalid_token"')])
        if claims.get("aud") != req.base_url + "/arm":
            return arm_error(401, "InvalidAuthenticationTokenAudience", "The access token has been obtained for "
                             "wrong audience or resource '%s'." % claims.get("aud"))
        rate = float(self.state.read()["settings"].get("azure_arm_reads_per_second") or 0)
        if rate > 0 and req.method == "GET":
            with self.state.buckets() as b:
                left, _ = st_mod.take_token(b, "azure-arm", max(1, int(rate)), rate, time.time())
            if left < 0:
                return arm_error(429, "TooManyRequests", "The request is being throttled as the limit has been "
                                 "reached for operation type - Read_ObservationWindow_00:05:00.",
                                 headers=[("Retry-After", "2"), ("x-ms-ratelimit-remaining-subscription-reads", "0")])
        try:
            return self.route(req, [p for p in req.path[len("/arm/"):].split("/") if p])
        except StateError as e:
            return arm_error(e.status, "BadRequest" if e.status == 400 else "ResourceNotFound", e.message)
        except ValueError:
            return arm_error(400, "InvalidRequestContent", "The request content was invalid and could not be "
                             "deserialized.")

    def route(self, req, parts):
        m = req.method
        low = [p.lower() for p in parts]
        if len(parts) < 2 or low[0] != "subscriptions":
            return arm_error(404, "NotFound", "The requested resource does not exist.")
        if parts[1] != AZURE_SUBSCRIPTION:
            return arm_error(404, "SubscriptionNotFound", "The subscription '%s' could not be found." % parts[1])
        if len(parts) < 4 or low[2] != "resourcegroups":
            return arm_error(404, "NotFound", "The requested resource does not exist.")
        if low[3] != RESOURCE_GROUP:
            return arm_error(404, "ResourceGroupNotFound", "Resource group '%s' could not be found." % parts[3])
        rest = low[4:]
        version = req.query.get("api-version")
        if len(rest) >= 3 and rest[:3] == ["providers", "microsoft.compute", "virtualmachines"]:
            if version not in COMPUTE_APIS:
                return self.bad_version(version, "Microsoft.Compute", "virtualMachines", COMPUTE_APIS)
            if len(rest) == 3 and m == "GET":
                return self.list_vms(req)
            inst = self.find(parts[7]) if len(rest) >= 4 else None
            if inst is None:
                return arm_error(404, "ResourceNotFound", "The Resource 'Microsoft.Compute/virtualMachines/%s' "
                                 "under resource group '%s' was not found." % (parts[7], parts[3]))
            if len(rest) == 4:
                if m == "GET":
                    return json_response(self.vm(req, inst, "instanceview" in (req.query.get("$expand") or "").lower()))
                if m == "PATCH":
                    body = req.json()
                    if "tags" in body:
                        self.state.update_instance(inst["id"], {"labels": dict(body["tags"] or {})})
                    return json_response(self.vm(req, self.state.instance(inst["id"]), False))
                if m == "DELETE":
                    with self.state.locked() as st:
                        st["instances"][inst["id"]]["delete_at"] = time.time()
                    return self.accepted(req)
            if len(rest) == 5 and m == "POST" and rest[4] in ("start", "poweroff", "deallocate"):
                status = {"start": "running", "poweroff": "stopped", "deallocate": "stopped"}[rest[4]]
                extra = dict(inst.get("extra") or {}, azure_deallocated=rest[4] == "deallocate")
                self.state.update_instance(inst["id"], {"status": status, "extra": extra})
                return self.accepted(req)
            if len(rest) == 5 and m == "GET" and rest[4] == "instanceview":
                return json_response(self.instance_view(inst))
        if len(rest) == 4 and rest[:2] == ["providers", "microsoft.network"] and m == "GET":
            if version not in NETWORK_APIS:
                return self.bad_version(version, "Microsoft.Network", parts[6], NETWORK_APIS)
            name = parts[7]
            for inst in self.instances():
                if rest[2] == "networkinterfaces" and name == inst["name"] + "-nic":
                    return json_response(self.nic(req, inst))
                if rest[2] == "publicipaddresses" and name == inst["name"] + "-ip" and inst.get("public_ipv4"):
                    return json_response(self.pip(req, inst))
            return arm_error(404, "ResourceNotFound", "The Resource 'Microsoft.Network/%s/%s' under resource group "
                             "'%s' was not found." % (parts[6], name, parts[3]))
        return arm_error(404, "NotFound", "The requested resource does not exist.")

    @staticmethod
    def bad_version(version, namespace, rtype, versions):
        if not version:
            return arm_error(400, "MissingApiVersionParameter", "The api-version query parameter (?api-version=) "
                             "is required for all requests.")
        return arm_error(400, "NoRegisteredProviderFound", "No registered resource provider found for location "
                         "'westeurope' and API version '%s' for type '%s'. The supported api-versions are '%s'."
                         % (version, rtype, ", ".join(versions)))

    def accepted(self, req):
        return json_response({}, 202, headers=[("Retry-After", "0"),
                                               ("Azure-AsyncOperation", req.base_url + "/arm/operations/done")])

    # -- views ---------------------------------------------------------------------------------

    def instances(self):
        return [i for i in self.state.instances() if i["platform"] == "azure"]

    def find(self, name):
        for inst in self.instances():
            if inst["name"].lower() == name.lower():
                return inst
        return None

    @staticmethod
    def rg_id(req=None):
        return "/subscriptions/%s/resourceGroups/%s" % (AZURE_SUBSCRIPTION, RESOURCE_GROUP)

    def power(self, inst):
        if inst["status"] == "running":
            return "running"
        return "deallocated" if (inst.get("extra") or {}).get("azure_deallocated") else "stopped"

    def instance_view(self, inst):
        power = self.power(inst)
        view = {"computerName": inst["hostname"], "osName": "debian", "osVersion": "12",
                "statuses": [{"code": "ProvisioningState/succeeded", "level": "Info",
                              "displayStatus": "Provisioning succeeded"},
                             {"code": "PowerState/" + power, "level": "Info",
                              "displayStatus": "VM " + power}]}
        if not inst.get("zone"):
            view["platformFaultDomain"] = 1
            view["platformUpdateDomain"] = 0
        return view

    def vm(self, req, inst, expand):
        rid = "%s/providers/Microsoft.Compute/virtualMachines/%s" % (self.rg_id(), inst["name"])
        props = {
            "vmId": inst["id"],
            "hardwareProfile": {"vmSize": inst["type"]},
            "storageProfile": {"imageReference": {"publisher": "Debian", "offer": "debian-12", "sku": "12",
                                                  "version": "latest"},
                               "osDisk": {"osType": "Linux", "name": inst["name"] + "-osdisk",
                                          "createOption": "FromImage", "caching": "ReadWrite",
                                          "managedDisk": {"storageAccountType": "Premium_LRS"}, "diskSizeGB": 30}},
            "osProfile": {"computerName": inst["hostname"], "adminUsername": "azureuser",
                          "linuxConfiguration": {"disablePasswordAuthentication": True}},
            "networkProfile": {"networkInterfaces": [{
                "id": "%s/providers/Microsoft.Network/networkInterfaces/%s-nic" % (self.rg_id(), inst["name"]),
                "properties": {"primary": True}}]},
            "provisioningState": "Succeeded",
        }
        if expand:
            props["instanceView"] = self.instance_view(inst)
        body = {"name": inst["name"], "id": rid, "type": "Microsoft.Compute/virtualMachines",
                "location": inst["region"], "tags": inst.get("labels") or {}, "properties": props}
        if inst.get("zone"):
            body["zones"] = [inst["zone"]]
        return body

    def nic(self, req, inst):
        nid = "%s/providers/Microsoft.Network/networkInterfaces/%s-nic" % (self.rg_id(), inst["name"])
        subnet = {"id": "%s/providers/Microsoft.Network/virtualNetworks/cloudnode-vnet/subnets/default" % self.rg_id()}
        configs = [{"name": "ipconfig1", "id": nid + "/ipConfigurations/ipconfig1",
                    "properties": {"privateIPAddress": inst.get("private_ipv4") or "",
                                   "privateIPAllocationMethod": "Dynamic", "privateIPAddressVersion": "IPv4",
                                   "subnet": subnet, "primary": True, "provisioningState": "Succeeded"}}]
        if inst.get("public_ipv4"):
            configs[0]["properties"]["publicIPAddress"] = {
                "id": "%s/providers/Microsoft.Network/publicIPAddresses/%s-ip" % (self.rg_id(), inst["name"])}
        if inst.get("ipv6"):
            configs.append({"name": "ipconfig-v6", "id": nid + "/ipConfigurations/ipconfig-v6",
                            "properties": {"privateIPAddress": inst["ipv6"], "privateIPAllocationMethod": "Dynamic",
                                           "privateIPAddressVersion": "IPv6", "subnet": subnet, "primary": False,
                                           "provisioningState": "Succeeded"}})
        mac = inst["mac"].replace(":", "-").upper()
        return {"name": inst["name"] + "-nic", "id": nid, "type": "Microsoft.Network/networkInterfaces",
                "location": inst["region"], "etag": 'W/"%s"' % inst["id"],
                "properties": {"provisioningState": "Succeeded", "ipConfigurations": configs, "macAddress": mac,
                               "primary": True, "enableAcceleratedNetworking": False,
                               "virtualMachine": {"id": "%s/providers/Microsoft.Compute/virtualMachines/%s"
                                                  % (self.rg_id(), inst["name"])}}}

    def pip(self, req, inst):
        return {"name": inst["name"] + "-ip",
                "id": "%s/providers/Microsoft.Network/publicIPAddresses/%s-ip" % (self.rg_id(), inst["name"]),
                "type": "Microsoft.Network/publicIPAddresses", "location": inst["region"],
                "sku": {"name": "Standard", "tier": "Regional"},
                "properties": {"provisioningState": "Succeeded", "ipAddress": inst["public_ipv4"],
                               "publicIPAddressVersion": "IPv4", "publicIPAllocationMethod": "Static",
                               "idleTimeoutInMinutes": 4}}

    def list_vms(self, req):
        every = self.instances()
        size = int(req.state.read()["settings"]["azure_page_size"])
        try:
            start = int(req.query.get("$skiptoken") or 0)
        except ValueError:
            return arm_error(400, "InvalidSkipToken", "The skip token is invalid.")
        body = {"value": [self.vm(req, i, False) for i in every[start:start + size]]}
        if start + size < len(every):
            q = dict(req.query, **{"$skiptoken": str(start + size)})
            body["nextLink"] = "%s%s?%s" % (req.base_url, req.path, urllib.parse.urlencode(q))
        return json_response(body)


def imds_token(req, inst):
    """GET /metadata/identity/oauth2/token of IMDS: a token of the VM's managed identity
    (extra.azure_identity: null for none)."""
    identity = (inst.get("extra") or {}).get("azure_identity", "system-assigned")
    if req.query.get("api-version") not in ("2018-02-01", "2019-08-01"):
        return json_response({"error": "invalid_request", "error_description": "Required query variable "
                              "'api-version' is missing or invalid"}, 400)
    resource = req.query.get("resource")
    if not resource:
        return json_response({"error": "invalid_request", "error_description": "Required query variable 'resource' "
                              "is missing"}, 400)
    if not identity:
        return json_response({"error": "invalid_request", "error_description": "Identity not found"}, 400)
    want = req.query.get("client_id")
    if want and want != identity:
        return json_response({"error": "invalid_request", "error_description": "Identity not found"}, 400)
    tok = issue_token(req.state, identity, resource)
    # IMDS writes the numbers as strings.
    return json_response({"access_token": tok["access_token"], "client_id": identity,
                          "expires_in": str(tok["expires_in"]), "expires_on": str(tok["expires_on"]),
                          "ext_expires_in": str(tok["expires_in"]), "not_before": str(int(time.time())),
                          "resource": resource, "token_type": "Bearer"})

