"""Azure: the Entra ID token endpoint (client credentials with a client secret, v2.0) and Azure
Resource Manager for virtual machines and their network interfaces and public IP addresses:
VM get (with $expand=instanceView) and list (value/nextLink pages), start, powerOff, deallocate,
delete and tags (PATCH), create or update (PUT, and template deployments: azure_deploy.py); NICs
and public IPs get; the resource group's virtual network, resource SKUs and marketplace image
versions, which clients read before creating a VM. Every ARM request needs a bearer token this fake
issued (here or at the managed identity endpoint of IMDS, metadata.py) for the ARM resource;
tokens expire after `azure_token_ttl` seconds. api-version is required and checked per resource
type. Errors are ARM's {"error": {"code", "message"}}; beyond `azure_arm_reads_per_second` (0: no
limit) reads get ARM's 429 with Retry-After.

Routes: /aad/<tenant>/oauth2/v2.0/token (the authority host), /arm/subscriptions/... (the
resource manager endpoint)."""
import re
import time
import urllib.parse
import uuid

from . import azure_deploy
from . import state as st_mod
from .metadata import AZURE_SUBSCRIPTION
from .state import StateError
from .web import Response, json_response

RESOURCE_GROUP = "cloudnode-rg"
AUTHORITY_HOST = "login.microsoftonline.com"
TENANT = "72f988bf-86f1-41af-91ab-2d7cd011db47"
# The api-versions Resource Manager serves for each resource type (a subset: the recent ones).
COMPUTE_APIS = ("2019-07-01", "2019-12-01", "2020-06-01", "2020-12-01", "2021-03-01", "2021-04-01", "2021-07-01", "2021-11-01", "2022-03-01", "2022-08-01", "2022-11-01",
                "2023-03-01", "2023-07-01", "2023-09-01", "2024-03-01", "2024-07-01")
NETWORK_APIS = ("2018-11-01", "2019-11-01", "2020-05-01", "2020-11-01", "2021-02-01", "2021-03-01", "2021-05-01", "2021-08-01", "2022-01-01", "2022-05-01", "2022-07-01",
                "2022-09-01", "2022-11-01", "2023-02-01", "2023-04-01", "2023-05-01", "2023-06-01", "2023-09-01",
                "2023-11-01", "2024-01-01", "2024-03-01", "2024-05-01")
RESOURCES_APIS = ("2016-06-01", "2019-06-01", "2019-10-01", "2019-11-01", "2020-01-01", "2020-06-01", "2020-10-01", "2021-01-01",
                  "2021-04-01", "2022-01-01", "2022-09-01", "2022-12-01", "2023-07-01")
SUBSCRIPTION_NAME = "cloudnode-test"
# VM sizes: vCPUs, memory (GB), family.
VM_SIZES = {"Standard_B2s": (2, 4, "standardBSFamily"), "Standard_D2s_v3": (2, 8, "standardDSv3Family"),
            "Standard_D4s_v3": (4, 16, "standardDSv3Family")}
# Marketplace images (publisher, offer, sku, lower case) and their versions.
IMAGES = {("debian", "debian-12", "12"): ["0.20241004.1872", "0.20241111.1937"],
          ("debian", "debian-12", "12-gen2"): ["0.20241004.1872", "0.20241111.1937"],
          ("canonical", "0001-com-ubuntu-server-jammy", "22_04-lts-gen2"): ["22.04.202410020", "22.04.202411010"]}
POWER = {"running": "running", "stopped": "stopped", "deallocated": "deallocated"}


def nic_name(inst):
    """A VM's NIC: the name its creator gave it (a deployment's), else "<vm>-nic"."""
    return (inst.get("extra") or {}).get("azure_nic") or inst["name"] + "-nic"


def pip_name(inst):
    return (inst.get("extra") or {}).get("azure_pip") or inst["name"] + "-ip"


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

    def aad(self, req, root, parts):
        """The authority's routes below root (a tenant's OpenID configuration and token
        endpoint); parts is the path below root."""
        if len(parts) == 4 and parts[1:] == ["v2.0", ".well-known", "openid-configuration"] and req.method == "GET":
            return self.openid_configuration(root, parts[0])
        if len(parts) == 4 and parts[1:] == ["oauth2", "v2.0", "token"]:
            return self.token(req, parts[0])
        return json_response({"error": "not_found"}, 404)

    def openid_configuration(self, root, tenant):
        if tenant not in (TENANT, "organizations", "common"):
            return self.aad_error(400, "invalid_tenant", "AADSTS90002: Tenant '%s' not found. Check to make sure "
                                  "you have the correct tenant ID and are signing into the correct cloud." % tenant)
        # A tenant's document names the tenant; organizations and common keep the placeholder.
        tid = TENANT if tenant == TENANT else "{tenantid}"
        base = "%s/%s" % (root, tenant)
        return json_response({
            "token_endpoint": base + "/oauth2/v2.0/token",
            "token_endpoint_auth_methods_supported": ["client_secret_post", "private_key_jwt", "client_secret_basic"],
            "jwks_uri": base + "/discovery/v2.0/keys",
            "response_modes_supported": ["query", "fragment", "form_post"],
            "subject_types_supported": ["pairwise"],
            "id_token_signing_alg_values_supported": ["RS256"],
            "response_types_supported": ["code", "id_token", "code id_token", "id_token token"],
            "scopes_supported": ["openid", "profile", "email", "offline_access"],
            "issuer": "%s/%s/v2.0" % (root, tid),
            "request_uri_parameter_supported": False,
            "userinfo_endpoint": "https://graph.microsoft.com/oidc/userinfo",
            "authorization_endpoint": base + "/oauth2/v2.0/authorize",
            "device_authorization_endpoint": base + "/oauth2/v2.0/devicecode",
            "http_logout_supported": True,
            "frontchannel_logout_supported": True,
            "end_session_endpoint": base + "/oauth2/v2.0/logout",
            "claims_supported": ["sub", "iss", "cloud_instance_name", "cloud_instance_host_name", "cloud_graph_host_name",
                                 "msgraph_host", "aud", "exp", "iat", "auth_time", "acr", "nonce", "preferred_username",
                                 "name", "tid", "ver", "at_hash", "c_hash", "email"],
            "kerberos_endpoint": base + "/kerberos",
            "tenant_region_scope": "EU",
            "cloud_instance_name": "microsoftonline.com",
            "cloud_graph_host_name": "graph.windows.net",
            "msgraph_host": "graph.microsoft.com",
            "rbac_url": "https://pas.windows.net"})

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
        if req.service == "aad" and not req.path.startswith("/aad/"):
            # Reached as the authority host itself.
            return self.aad(req, "https://" + AUTHORITY_HOST, req.path.split("/")[1:])
        if req.path.startswith("/aad/"):
            return self.aad(req, req.base_url + "/aad", req.path.split("/")[2:])
        # Clients join the endpoint (with its trailing slash) and the path: ARM ignores empty segments.
        if [p for p in req.path.split("/") if p] == ["arm", "metadata", "endpoints"] and req.method == "GET":
            return self.metadata_endpoints(req)
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
        version = req.query.get("api-version")
        if low in (["subscriptions"], ["tenants"]) and m == "GET":
            if version not in RESOURCES_APIS:
                return self.bad_version(version, "Microsoft.Resources", low[0], RESOURCES_APIS)
            return json_response({"value": [self.subscription() if low[0] == "subscriptions" else self.tenant()],
                                  "count": {"type": "Total", "value": 1}})
        if len(parts) < 2 or low[0] != "subscriptions":
            return arm_error(404, "NotFound", "The requested resource does not exist.")
        if parts[1] != AZURE_SUBSCRIPTION:
            return arm_error(404, "SubscriptionNotFound", "The subscription '%s' could not be found." % parts[1])
        if len(parts) == 8 and low[2:5] == ["providers", "microsoft.compute", "locations"] and low[6] == "operations" \
                and m == "GET":
            return self.operation(req, parts[7])
        if low[2:] == ["providers", "microsoft.compute", "skus"] and m == "GET":
            return self.skus(req)
        if len(parts) >= 14 and low[2:5] == ["providers", "microsoft.compute", "locations"] and \
                low[6] == "publishers" and low[8:13] == ["artifacttypes", "vmimage", "offers", low[11], "skus"] and m == "GET":
            return self.images(req, parts)
        if len(parts) in (2, 3, 4) and m == "GET" and low[2:3] in ([], ["resourcegroups"]):
            if version not in RESOURCES_APIS:
                return self.bad_version(version, "Microsoft.Resources", "resourceGroups" if len(parts) > 2
                                        else "subscriptions", RESOURCES_APIS)
            if len(parts) == 2:
                return json_response(self.subscription())
            if len(parts) == 3:
                return json_response({"value": [self.resource_group()]})
        if len(parts) < 4 or low[2] != "resourcegroups":
            return arm_error(404, "NotFound", "The requested resource does not exist.")
        if low[3] != RESOURCE_GROUP:
            return arm_error(404, "ResourceGroupNotFound", "Resource group '%s' could not be found." % parts[3])
        if len(parts) == 4 and m == "GET":
            return json_response(self.resource_group())
        rest = low[4:]
        if len(rest) >= 3 and rest[:3] == ["providers", "microsoft.compute", "virtualmachines"]:
            if version not in COMPUTE_APIS:
                return self.bad_version(version, "Microsoft.Compute", "virtualMachines", COMPUTE_APIS)
            if len(rest) == 3 and m == "GET":
                return self.list_vms(req)
            inst = self.find(parts[7]) if len(rest) >= 4 else None
            if len(rest) == 4 and m == "PUT":
                created = inst is None
                problem = self.vm_problem(parts[7], req.json() or {})
                if problem:
                    return arm_error(400 if "size" in problem else 404,
                                     "SkuNotAvailable" if "size" in problem else "PlatformImageNotFound", problem)
                self.put_vm(req, parts[7], req.json() or {}, {})
                inst = self.find(parts[7])
                return json_response(self.vm(req, inst, False), 201 if created else 200)
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
                    return self.accepted(req, inst)
            if len(rest) == 5 and m == "POST" and rest[4] in ("start", "poweroff", "deallocate"):
                status = {"start": "running", "poweroff": "stopped", "deallocate": "stopped"}[rest[4]]
                extra = dict(inst.get("extra") or {}, azure_deallocated=rest[4] == "deallocate")
                self.state.update_instance(inst["id"], {"status": status, "extra": extra})
                return self.accepted(req, inst)
            if len(rest) == 5 and m == "GET" and rest[4] == "instanceview":
                return json_response(self.instance_view(inst))
        if len(rest) >= 4 and rest[:2] == ["providers", "microsoft.resources"] and rest[2] == "deployments":
            return azure_deploy.handle(self, req, parts[7:], RESOURCES_APIS, {
                "req": req, "rg_id": self.rg_id(), "rg": RESOURCE_GROUP, "location": "westeurope",
                "subscription": AZURE_SUBSCRIPTION, "tenant": TENANT})
        if len(rest) == 3 and rest == ["providers", "microsoft.network", "virtualnetworks"] and m == "GET":
            if version not in NETWORK_APIS:
                return self.bad_version(version, "Microsoft.Network", parts[6], NETWORK_APIS)
            return json_response({"value": [self.vnet()]})
        if len(rest) == 3 and rest[:2] == ["providers", "microsoft.network"] and m == "GET" \
                and rest[2] in ("networkinterfaces", "publicipaddresses"):
            if version not in NETWORK_APIS:
                return self.bad_version(version, "Microsoft.Network", parts[6], NETWORK_APIS)
            if rest[2] == "networkinterfaces":
                return json_response({"value": [self.nic(req, i) for i in self.instances()]})
            return json_response({"value": [self.pip(req, i) for i in self.instances() if i.get("public_ipv4")]})
        if len(rest) == 4 and rest[:2] == ["providers", "microsoft.network"] and m == "GET":
            if version not in NETWORK_APIS:
                return self.bad_version(version, "Microsoft.Network", parts[6], NETWORK_APIS)
            name = parts[7]
            for inst in self.instances():
                if rest[2] == "networkinterfaces" and name == nic_name(inst):
                    return json_response(self.nic(req, inst))
                if rest[2] == "publicipaddresses" and name == pip_name(inst) and inst.get("public_ipv4"):
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

    def accepted(self, req, inst):
        """202 Accepted of a long-running operation, with an empty body: its status is polled at
        Azure-AsyncOperation (and Location), as Compute answers. The fake's operations finish at once."""
        op = "%s/arm/subscriptions/%s/providers/Microsoft.Compute/locations/%s/operations/%s" % (
            req.base_url, AZURE_SUBSCRIPTION, inst["region"], uuid.uuid4())
        version = urllib.parse.urlencode({"api-version": req.query.get("api-version")})
        return Response(202, b"", None, headers=[
            ("Retry-After", "0"), ("Azure-AsyncOperation", op + "?" + version),
            ("Location", op + "?monitor=true&" + version)])

    def operation(self, req, op):
        if req.query.get("api-version") not in COMPUTE_APIS:
            return self.bad_version(req.query.get("api-version"), "Microsoft.Compute", "locations/operations",
                                    COMPUTE_APIS)
        try:
            uuid.UUID(op)
        except ValueError:
            return arm_error(404, "NotFound", "The requested resource does not exist.")
        if req.query.get("monitor") == "true":
            return Response(200, b"", None)
        now = time.strftime("%Y-%m-%dT%H:%M:%S.0000000+00:00", time.gmtime())
        return json_response({"startTime": now, "endTime": now, "status": "Succeeded", "name": op})

    @staticmethod
    def subscription():
        return {"id": "/subscriptions/" + AZURE_SUBSCRIPTION, "authorizationSource": "RoleBased",
                "managedByTenants": [], "subscriptionId": AZURE_SUBSCRIPTION, "tenantId": TENANT,
                "displayName": SUBSCRIPTION_NAME, "state": "Enabled",
                "subscriptionPolicies": {"locationPlacementId": "Public_2014-09-01",
                                         "quotaId": "PayAsYouGo_2014-09-01", "spendingLimit": "Off"}}

    @staticmethod
    def tenant():
        return {"id": "/tenants/" + TENANT, "tenantId": TENANT, "countryCode": "DE", "displayName": "cloudnode",
                "domains": ["cloudnode.onmicrosoft.com"], "tenantCategory": "Home",
                "defaultDomain": "cloudnode.onmicrosoft.com", "tenantType": "AAD"}

    def resource_group(self):
        return {"id": self.rg_id(), "name": RESOURCE_GROUP, "type": "Microsoft.Resources/resourceGroups",
                "location": "westeurope", "properties": {"provisioningState": "Succeeded"}}

    @staticmethod
    def metadata_endpoints(req):
        """ARM's metadata/endpoints (api-version 2015-01-01), which clients read to learn the
        authority and token audience of a cloud given its Resource Manager endpoint alone."""
        if req.query.get("api-version") not in ("2015-01-01", "2019-05-01", "2020-06-01", "2022-09-01"):
            return arm_error(400, "MissingApiVersionParameter", "The api-version query parameter (?api-version=) "
                             "is required for all requests.")
        arm = req.base_url + "/arm/"
        return json_response({"galleryEndpoint": "https://gallery.azure.com/",
                              "graphEndpoint": "https://graph.windows.net/",
                              "portalEndpoint": "https://portal.azure.com/",
                              "authentication": {"loginEndpoint": "https://%s/" % AUTHORITY_HOST,
                                                 "audiences": [arm]}})

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
                # The Linux guest agent's report, as Resource Manager relays it while the VM runs.
                "vmAgent": {"vmAgentVersion": "2.9.1.1", "statuses": [
                    {"code": "ProvisioningState/succeeded", "level": "Info", "displayStatus": "Ready",
                     "message": "Guest Agent is running",
                     "time": time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime())}],
                    "extensionHandlers": []},
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
                "id": "%s/providers/Microsoft.Network/networkInterfaces/%s" % (self.rg_id(), nic_name(inst)),
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
        nid = "%s/providers/Microsoft.Network/networkInterfaces/%s" % (self.rg_id(), nic_name(inst))
        subnet = {"id": "%s/providers/Microsoft.Network/virtualNetworks/cloudnode-vnet/subnets/default" % self.rg_id()}
        etag = 'W/"%s"' % inst["id"]
        ipc = (inst.get("extra") or {}).get("azure_ipconfig") or "ipconfig1"
        configs = [{"name": ipc, "id": nid + "/ipConfigurations/" + ipc, "etag": etag,
                    "type": "Microsoft.Network/networkInterfaces/ipConfigurations",
                    "properties": {"isInUseWithService": False, "privateIPAddress": inst.get("private_ipv4") or "",
                                   "privateIPAllocationMethod": "Dynamic", "privateIPAddressVersion": "IPv4",
                                   "subnet": subnet, "primary": True, "provisioningState": "Succeeded"}}]
        if inst.get("public_ipv4"):
            configs[0]["properties"]["publicIPAddress"] = {
                "id": "%s/providers/Microsoft.Network/publicIPAddresses/%s" % (self.rg_id(), pip_name(inst))}
        if inst.get("ipv6"):
            configs.append({"name": "ipconfig-v6", "id": nid + "/ipConfigurations/ipconfig-v6", "etag": etag,
                            "type": "Microsoft.Network/networkInterfaces/ipConfigurations",
                            "properties": {"isInUseWithService": False, "privateIPAddress": inst["ipv6"], "privateIPAllocationMethod": "Dynamic",
                                           "privateIPAddressVersion": "IPv6", "subnet": subnet, "primary": False,
                                           "provisioningState": "Succeeded"}})
        mac = inst["mac"].replace(":", "-").upper()
        nsg = (inst.get("extra") or {}).get("azure_nsg")
        body = {"name": nic_name(inst), "id": nid, "type": "Microsoft.Network/networkInterfaces",
                "location": inst["region"], "etag": etag,
                "properties": {"provisioningState": "Succeeded", "ipConfigurations": configs, "macAddress": mac,
                               "primary": True, "enableAcceleratedNetworking": False, "enableIPForwarding": False,
                               "virtualMachine": {"id": "%s/providers/Microsoft.Compute/virtualMachines/%s"
                                                  % (self.rg_id(), inst["name"])}}}
        if nsg:
            body["properties"]["networkSecurityGroup"] = {
                "id": "%s/providers/Microsoft.Network/networkSecurityGroups/%s" % (self.rg_id(), nsg)}
        return body

    def pip(self, req, inst):
        body = {"name": pip_name(inst),
                "id": "%s/providers/Microsoft.Network/publicIPAddresses/%s" % (self.rg_id(), pip_name(inst)),
                "type": "Microsoft.Network/publicIPAddresses", "location": inst["region"],
                "sku": {"name": "Standard", "tier": "Regional"},
                "properties": {"provisioningState": "Succeeded", "ipAddress": inst["public_ipv4"],
                               "publicIPAddressVersion": "IPv4", "publicIPAllocationMethod": "Static",
                               "idleTimeoutInMinutes": 4,
                               "ipConfiguration": {"id": "%s/providers/Microsoft.Network/networkInterfaces/%s/"
                                                         "ipConfigurations/%s" % (
                                                             self.rg_id(), nic_name(inst),
                                                             (inst.get("extra") or {}).get("azure_ipconfig") or
                                                             "ipconfig1")}}}
        if inst.get("zone"):
            body["zones"] = [inst["zone"]]
        return body

    def vm_problem(self, name, body):
        """Why a new VM of this body cannot be created (None when it can): an image or size this
        cloud does not offer. An existing VM's update is not checked."""
        if self.find(name):
            return None
        props = body.get("properties") or {}
        size = (props.get("hardwareProfile") or {}).get("vmSize")
        if size not in VM_SIZES:
            return "The requested VM size %s is not available in the current region." % size
        ref = (props.get("storageProfile") or {}).get("imageReference") or {}
        versions = IMAGES.get((str(ref.get("publisher")).lower(), str(ref.get("offer")).lower(),
                               str(ref.get("sku")).lower()))
        if versions is None or (ref.get("version") or "latest") not in versions + ["latest"]:
            return ("The following list of images referenced from the deployment template are not found: Publisher: "
                    "%s, Offer: %s, Sku: %s, Version: %s" % (ref.get("publisher"), ref.get("offer"), ref.get("sku"),
                                                             ref.get("version") or "latest"))
        return None

    def put_vm(self, req, name, body, by_type):
        """A VM's createOrUpdate (a PUT, or a deployment's resource): a new VM is created with what
        the body says; an existing one takes the body's tags and size (what `az vm update` changes).
        Returns the VM's id."""
        if not re.fullmatch(r"[A-Za-z0-9][-A-Za-z0-9_.]{0,63}", name):
            raise StateError(400, "The VM name '%s' is not valid." % name)
        inst = self.find(name)
        if inst is None:
            azure_deploy.create_vm(self.state, name, body, by_type)
        else:
            changes = {"labels": dict(body.get("tags") or {})}
            size = ((body.get("properties") or {}).get("hardwareProfile") or {}).get("vmSize")
            if size:
                changes["type"] = size
            self.state.update_instance(inst["id"], changes)
        return "%s/providers/Microsoft.Compute/virtualMachines/%s" % (self.rg_id(), name)

    @staticmethod
    def skus(req):
        """Resource SKUs (api-version 2019-04-01, 2021-07-01): the VM sizes this cloud offers, with
        the zones of each location, which clients check before placing a VM in a zone."""
        if req.query.get("api-version") not in ("2019-04-01", "2021-07-01"):
            return arm_error(400, "InvalidApiVersionParameter", "The api-version '%s' is invalid. The supported "
                             "versions are '2021-07-01,2019-04-01'." % req.query.get("api-version"))
        value = []
        for size, (vcpus, mem, family) in sorted(VM_SIZES.items()):
            value.append({"resourceType": "virtualMachines", "name": size, "tier": "Standard",
                          "size": size.split("_", 1)[1], "family": family, "locations": ["westeurope"],
                          "locationInfo": [{"location": "westeurope", "zones": ["1", "2", "3"], "zoneDetails": []}],
                          "capabilities": [{"name": "vCPUs", "value": str(vcpus)},
                                           {"name": "MemoryGB", "value": str(mem)},
                                           {"name": "HyperVGenerations", "value": "V1,V2"},
                                           {"name": "CpuArchitectureType", "value": "x64"}],
                          "restrictions": []})
        return json_response({"value": value})

    def vnet(self):
        """The resource group's one virtual network, where every VM's NIC is."""
        vid = "%s/providers/Microsoft.Network/virtualNetworks/cloudnode-vnet" % self.rg_id()
        return {"name": "cloudnode-vnet", "id": vid, "type": "Microsoft.Network/virtualNetworks",
                "location": "westeurope", "etag": 'W/"1"',
                "properties": {"provisioningState": "Succeeded", "addressSpace": {"addressPrefixes": ["10.0.0.0/16"]},
                               "subnets": [{"name": "default", "id": vid + "/subnets/default", "etag": 'W/"1"',
                                            "type": "Microsoft.Network/virtualNetworks/subnets",
                                            "properties": {"provisioningState": "Succeeded",
                                                           "addressPrefix": "10.0.0.0/16"}}],
                               "virtualNetworkPeerings": [], "enableDdosProtection": False}}

    def images(self, req, parts):
        """Marketplace image versions of a publisher/offer/sku (the list is a bare JSON array,
        as Compute answers it), and one version's details."""
        if req.query.get("api-version") not in COMPUTE_APIS:
            return self.bad_version(req.query.get("api-version"), "Microsoft.Compute", "locations/publishers",
                                    COMPUTE_APIS)
        loc, pub, offer, sku = parts[5], parts[7], parts[11], parts[13]
        versions = IMAGES.get((pub.lower(), offer.lower(), sku.lower()))
        if versions is None or len(parts) not in (15, 16) or parts[14].lower() != "versions":
            return arm_error(404, "NotFound", "Artifact: VMImage was not found.")
        base = ("/Subscriptions/%s/Providers/Microsoft.Compute/Locations/%s/Publishers/%s/ArtifactTypes/VMImage/"
                "Offers/%s/Skus/%s/Versions/" % (AZURE_SUBSCRIPTION, loc, pub, offer, sku))
        if len(parts) == 15:
            names = sorted(versions, reverse="desc" in (req.query.get("$orderby") or "").lower())
            top = req.query.get("$top")
            if top:
                names = names[:int(top)]
            return json_response([{"location": loc, "name": n, "id": base + n} for n in names])
        if parts[15] not in versions:
            return arm_error(404, "NotFound", "Artifact: VMImage was not found.")
        return json_response({"location": loc, "name": parts[15], "id": base + parts[15], "properties": {
            "hyperVGeneration": "V2" if sku.lower().endswith("gen2") else "V1", "architecture": "x64",
            "replicaType": "Unmanaged", "disallowed": {"vmDiskType": "Unmanaged"},
            "automaticOSUpgradeProperties": {"automaticOSUpgradeSupported": False},
            "imageDeprecationStatus": {"imageState": "Active"},
            "osDiskImage": {"operatingSystem": "Linux", "sizeInBytes": 32213303808, "sizeInGb": 30},
            "dataDiskImages": []}})

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

