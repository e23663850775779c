#!/usr/bin/env python3
"""The azure provider of lib/provider/provider.h against Azure Resource Manager and the Entra ID
token endpoint of tests/fake-cloud: lookup by providerID (resource group in any case) and by Node
name, the VM's primary NIC and public IP (dual-stack), zone or fault domain, deallocated and
stopped VMs as shut down, VMs gone; tokens from the managed identity endpoint of IMDS and from a
client secret, fetched once, refreshed once on 401; ARM's 429 with Retry-After as retryable;
rejected credentials and malformed, hostile or oversized answers as one clear error without any
secret; and the fake's own rules (api-version, expired tokens, audience)."""
import json
import os
import sys
import tempfile
import time
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from cntap import Tap  # noqa: E402
from fakecloud import FakeCloud  # noqa: E402
from providerlookup import TOOL, addrs, eq, renewed_once, write  # noqa: E402
from providerlookup import lookup as provider_lookup  # noqa: E402

SUB = "8d10da13-8125-4ba9-a717-bf7490507b3d"
RG = "cloudnode-rg"
TENANT = "72f988bf-86f1-41af-91ab-2d7cd011db47"
SECRET = "s3cr3t~value&with=specials"


def lookup(conf, *calls, env=None):
    return provider_lookup("azure", conf, *calls, env=env)


def pid(inst, rg=RG):
    return "azure:///subscriptions/%s/resourceGroups/%s/providers/Microsoft.Compute/virtualMachines/%s" % (
        SUB, rg, inst["name"])


def base_conf(c):
    return ("[Global]\nsubscriptionId = %s\nresourceGroup = %s\nlocation = westeurope\n"
            "resourceManagerEndpoint = %s/arm\nactiveDirectoryEndpoint = %s/aad\n" % (SUB, RG, c.url, c.url))


def secret_conf(d, c, secret=SECRET, name="azure.conf"):
    c.settings(azure_service_principals=[{"client_id": "app-1", "secret": SECRET}])
    return write(os.path.join(d, name), base_conf(c) + "tenantId = %s\naadClientId = app-1\naadClientSecret = \"%s\"\n"
                 % (TENANT, secret))


def mi_conf(d, c, vm, name="mi.conf"):
    return write(os.path.join(d, name), base_conf(c) + "useManagedIdentityExtension = true\nmetadata-endpoint = %s\n"
                 % c.metadata_url(vm["id"]))


def is_token(r):
    return "/oauth2/" in r.get("path", "")


def token_requests(c, since):
    return [r for r in c.requests()[since:] if is_token(r)]


def test_lookups(t, c, d):
    a1 = c.add_instance({"platform": "azure", "name": "a1"})
    a2 = c.add_instance({"platform": "azure", "name": "a2", "zone": "", "ipv6": None, "public_ipv4": None})
    conf = secret_conf(d, c)
    before = len(c.requests())
    by_id, upper, by_name, nf, nex, sd, other = lookup(
        conf, "metadata", pid(a1), "metadata", pid(a1, "CloudNode-RG"), "metadata", "a2", "metadata", "nosuch",
        "exists", pid({"name": "gone"}), "shutdown", "a1", "exists", pid(a1, "other-rg"))
    eq(t, by_id["error"], 0, "lookup by providerID succeeds", by_id)
    eq(t, by_id["providerID"], pid(a1), "providerID azure:///subscriptions/.../virtualMachines/<name>")
    eq(t, (by_id["instanceID"], by_id["instanceType"], by_id["region"], by_id["zone"]),
       (a1["id"], a1["type"], "westeurope", "westeurope-1"), "vmId, size, location and <location>-<zone>", by_id)
    eq(t, addrs(by_id), [("InternalIP", a1["private_ipv4"]), ("InternalIP", a1["ipv6"]),
                         ("ExternalIP", a1["public_ipv4"]), ("Hostname", a1["hostname"])],
       "dual-stack: the primary NIC's IPv4 and IPv6, its public IP, the computer name", by_id)
    eq(t, upper.get("providerID"), pid(a1), "a providerID with the resource group in other case: lower-cased")
    eq(t, (by_name.get("providerID"), by_name.get("zone")), (pid(a2), "1"),
       "lookup by name in the configured group; a VM without zone is in its fault domain", by_name)
    eq(t, addrs(by_name), [("InternalIP", a2["private_ipv4"]), ("Hostname", a2["hostname"])],
       "IPv4 only, without public IP", by_name)
    eq(t, nf["class"], "not-found", "an unknown name is not-found", nf)
    eq(t, (nex["error"], nex["value"]), (0, False), "exists is false for an unknown VM", nex)
    eq(t, (sd["error"], sd["value"]), (0, False), "a running VM is not shut down", sd)
    eq(t, (other["error"], other["value"]), (0, False), "a resource group that does not exist: no such VM", other)
    eq(t, len(token_requests(c, before)), 1, "one token serves every lookup")
    t.ok(all(SECRET not in json.dumps(r) for r in c.requests()[before:] if "/arm/" in r.get("path", "")),
         "the secret goes to the token endpoint only")

    c.api("POST", "/arm/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Compute/virtualMachines/a1/deallocate"
          "?api-version=2023-03-01" % (SUB, RG), b"", headers={"Authorization": "Bearer x"})
    c.stop(a1["id"])
    c.update_instance(a1["id"], {"extra": {"azure_deallocated": True}})
    sd, ex = lookup(conf, "shutdown", pid(a1), "exists", pid(a1))
    eq(t, (sd["value"], ex["value"]), (True, True), "a deallocated VM exists and is shut down", sd)
    c.update_instance(a1["id"], {"extra": {"azure_deallocated": False}})
    sd, = lookup(conf, "shutdown", pid(a1))
    eq(t, sd["value"], True, "a stopped VM is shut down", sd)
    c.start(a1["id"])
    c.remove_instance(a2["id"])
    ex, = lookup(conf, "exists", pid(a2))
    eq(t, (ex["error"], ex["value"]), (0, False), "a VM gone: exists is false", ex)
    r, = lookup(conf, "metadata", "azure:///subscriptions/%s/resourceGroups/%s/providers/Microsoft.Compute/"
                "virtualMachineScaleSets/ss/virtualMachines/0" % (SUB, RG))
    eq(t, r["class"], "terminal", "a scale set VM's providerID is refused (not handled)", r)
    r, = lookup(conf, "metadata", "gce://p/z/n")
    eq(t, r["class"], "terminal", "a providerID of another cloud is refused", r)


def test_credentials(t, c, d):
    vm = c.add_instance({"platform": "azure", "name": "mi-vm"})
    before = len(c.requests())
    r, = lookup(mi_conf(d, c, vm), "exists", "mi-vm")
    eq(t, (r["error"], r["value"]), (0, True), "token from the managed identity endpoint of IMDS", r)
    toks = token_requests(c, before)
    eq(t, [(x["method"], x["headers"].get("Metadata")) for x in toks], [("GET", "true")],
       "one IMDS token request, with Metadata: true")
    none = c.add_instance({"platform": "azure", "name": "no-id", "extra": {"azure_identity": None}})
    r, = lookup(mi_conf(d, c, none, "none.conf"), "exists", "mi-vm")
    eq(t, r["class"], "terminal", "a VM without managed identity: terminal", r)
    r, = lookup(secret_conf(d, c, "wrong-secret", "wrong.conf"), "exists", "mi-vm")
    eq(t, r["class"], "terminal", "a wrong client secret: terminal", r)
    t.ok("rejected" in r.get("message", "") and "wrong-secret" not in json.dumps(r),
         "the message says so, without the secret", r)
    env_conf = write(os.path.join(d, "env.conf"), base_conf(c).replace("subscriptionId = %s\n" % SUB, ""))
    r, = lookup(env_conf, "exists", "mi-vm", env={"AZURE_SUBSCRIPTION_ID": SUB, "AZURE_TENANT_ID": TENANT,
                                                  "AZURE_CLIENT_ID": "app-1", "AZURE_CLIENT_SECRET": SECRET})
    eq(t, (r["error"], r["value"]), (0, True), "subscription and client secret from AZURE_* variables", r)


def test_tokens(t, c, d):
    c.add_instance({"platform": "azure", "name": "t1"})
    conf = secret_conf(d, c)
    renewed_once(t, c, "azure", conf, "t1", {"platform": "azure", "service": "arm"}, is_token)
    c.settings(azure_token_ttl=30)
    before = len(c.requests())
    lookup(conf, "exists", "t1", "exists", "t1")
    eq(t, len(token_requests(c, before)), 2, "a token about to expire is fetched again")
    c.settings(azure_token_ttl=1)
    st, _, body = c.api("POST", "/aad/%s/oauth2/v2.0/token" % TENANT,
                        "grant_type=client_credentials&client_id=app-1&client_secret=%s&scope=%s/arm/.default"
                        % (urllib.parse.quote(SECRET, safe=""), urllib.parse.quote(c.url, safe="")),
                        headers={"Content-Type": "application/x-www-form-urlencoded"})
    tok = body["access_token"]
    time.sleep(2.1)
    st, _, body = c.api("GET", "/arm/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Compute/virtualMachines/t1"
                        "?api-version=2023-03-01" % (SUB, RG), headers={"Authorization": "Bearer " + tok})
    eq(t, (st, body["error"]["code"]), (401, "InvalidAuthenticationToken"), "the fake: an expired token is 401")
    c.settings(azure_token_ttl=3599)


def test_errors(t, c, d):
    e1 = c.add_instance({"platform": "azure", "name": "e1"})
    conf = secret_conf(d, c)
    c.throttle("azure", count=1, service="arm")
    r, = lookup(conf, "metadata", pid(e1))
    eq(t, (r["class"], r["retryAfter"]), ("retryable", 3.0), "ARM's 429: retryable after its Retry-After", r)
    c.settings(azure_arm_reads_per_second=1)
    res = lookup(conf, *(["metadata", pid(e1)] * 4))
    t.ok(any(x["class"] == "retryable" and x["retryAfter"] == 2.0 for x in res),
         "a request storm meets ARM's read limit as retryable errors with its delay", res)
    c.settings(azure_arm_reads_per_second=0)
    c.fail({"platform": "azure", "service": "arm", "status": 403, "count": 1,
            "body": {"error": {"code": "AuthorizationFailed", "message": "The client does not have authorization"}}})
    r, = lookup(conf, "metadata", pid(e1))
    eq(t, (r["class"], r.get("message")), ("terminal", "The client does not have authorization"),
       "AuthorizationFailed is terminal, with ARM's message", r)
    c.fail({"platform": "azure", "service": "arm", "status": 200, "count": 1, "body": "not json"})
    r, = lookup(conf, "metadata", pid(e1))
    eq(t, r.get("message"), "malformed response from the cloud API", "a body that is not JSON: one clear error", r)
    hostile = {"id": "/subscriptions/x/resourceGroups/g/providers/Microsoft.Compute/virtualMachines/a/../../b",
               "name": "e1", "location": "westeurope"}
    c.fail({"platform": "azure", "service": "arm", "status": 200, "count": 1, "body": hostile})
    r, = lookup(conf, "metadata", pid(e1))
    eq(t, r.get("message"), "unexpected virtual machine object from Azure Resource Manager",
       "a hostile resource id is refused", r)
    c.fail({"platform": "azure", "service": "arm", "path": "networkInterfaces", "status": 200, "count": 1,
            "body": {"properties": {"ipConfigurations": [{"properties": {
                "publicIPAddress": {"id": "/subscriptions/x/../../../evil?x=1"}}}]}}})
    r, = lookup(conf, "metadata", pid(e1))
    eq(t, r.get("message"), "unexpected network interface from Azure", "a hostile public IP id is not followed", r)
    c.fail({"platform": "azure", "service": "arm", "status": 200, "count": 1,
            "body": '{"name": "' + "a" * (9 * 1024 * 1024) + '"}'})
    r, = lookup(conf, "metadata", pid(e1))
    t.ok(r["class"] == "retryable" and "aaaa" not in r.get("message", ""), "an oversized answer: a short error", r)
    c.clear_faults()
    st, _, body = c.api("GET", "/arm/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Compute/virtualMachines/e1"
                        % (SUB, RG), headers={"Authorization": "Bearer x"})
    eq(t, st, 401, "the fake: a forged token is 401")


def test_fake_deployments(t, c, d):
    """The fake's template deployments (tests/fakecloud/azure_deploy.py) beyond what az writes:
    parameters with defaults, variables, concat and resourceId; a secure parameter not given back;
    an unknown function or resource type failing the deployment, and creating nothing."""
    import urllib.parse
    c.settings(azure_service_principals=[{"client_id": "app-1", "secret": SECRET}])
    st, _, tok = c.api("POST", "/aad/%s/oauth2/v2.0/token" % TENANT, urllib.parse.urlencode({
        "grant_type": "client_credentials", "client_id": "app-1", "client_secret": SECRET,
        "scope": c.url + "/arm/.default"}), {"Content-Type": "application/x-www-form-urlencoded"})
    eq(t, st, 200, "a token for Resource Manager")
    h = {"Authorization": "Bearer " + tok["access_token"]}
    dep = "/arm/subscriptions/%s/resourcegroups/%s/providers/Microsoft.Resources/deployments/" % (SUB, RG)

    def deploy(name, template, params=None):
        st, hdrs, body = c.api("PUT", dep + name + "?api-version=2019-10-01", {"properties": {
            "mode": "Incremental", "template": template, "parameters": params or {}}}, h)
        if st != 201:
            return st, body
        op = hdrs.get("Azure-AsyncOperation", "")
        _, _, status = c.api("GET", op[len(c.url):], headers=h)
        return st, status

    vm = {"type": "Microsoft.Compute/virtualMachines", "apiVersion": "2020-06-01",
          "name": "[concat(parameters('prefix'), '-', variables('suffix'))]", "location": "[resourceGroup().location]",
          "tags": {"by": "[toUpper('template')]"},
          "properties": {"hardwareProfile": {"vmSize": "[parameters('size')]"},
                         "storageProfile": {"imageReference": {"publisher": "Debian", "offer": "debian-12", "sku": "12",
                                                               "version": "latest"}},
                         "osProfile": {"computerName": "tpl", "adminUsername": "azureuser",
                                       "adminPassword": "[parameters('password')]"},
                         "networkProfile": {"networkInterfaces": [
                             {"id": "[resourceId('Microsoft.Network/networkInterfaces', 'tpl-nic')]"}]}}}
    template = {"parameters": {"prefix": {"type": "string"}, "size": {"type": "string", "defaultValue": "Standard_B2s"},
                               "password": {"type": "securestring"}},
                "variables": {"suffix": "[string(7)]"}, "resources": [vm]}
    st, status = deploy("d1", template, {"prefix": {"value": "tpl"}, "password": {"value": "Pa55word!"}})
    eq(t, (st, status.get("status")), (201, "Succeeded"), "a template with parameters and variables deploys")
    made = [i for i in c.instances() if i["name"] == "tpl-7"]
    eq(t, [(i["type"], i["labels"], (i.get("extra") or {}).get("azure_nic")) for i in made],
       [("Standard_B2s", {"by": "TEMPLATE"}, "tpl-nic")], "the VM with its evaluated name, size default, tags and NIC")
    _, _, got = c.api("GET", dep + "d1?api-version=2019-10-01", headers=h)
    params = (got.get("properties") or {}).get("parameters") or {}
    t.ok("password" not in params and params.get("prefix", {}).get("value") == "tpl" and
         "Pa55word" not in str(got), "the deployment gives back its parameters, but not the secure one", params)
    for name, bad, want in (("d2", "[guid('x')]", "InvalidTemplate"), ("d3", None, "NoRegisteredProviderFound")):
        res = dict(vm, name=bad) if bad else {"type": "Microsoft.Storage/storageAccounts", "name": "sa",
                                              "location": "westeurope"}
        before = len(c.instances())
        st, status = deploy(name, {"resources": [res], "parameters": template["parameters"]},
                            {"prefix": {"value": "x"}, "password": {"value": "p"}})
        eq(t, (st, status.get("status"), (status.get("error") or {}).get("code")), (201, "Failed", want),
           "%s: the deployment fails with %s" % (want == "InvalidTemplate" and "an unknown function" or
                                                 "an unknown resource type", want))
        eq(t, len(c.instances()), before, "and creates nothing")
    st, status = deploy("d4", {"resources": [vm], "parameters": {"prefix": {"type": "string"}}})
    eq(t, (status.get("status"), (status.get("error") or {}).get("code")), ("Failed", "InvalidTemplate"),
       "a parameter without value or default fails the deployment")


def main():
    t = Tap()
    if not os.access(TOOL, os.X_OK):
        t.bail_out("tests/provider-lookup is not built")
    with tempfile.TemporaryDirectory() as d:
        with FakeCloud(os.path.join(d, "cloud")) as c:
            for fn in (test_lookups, test_credentials, test_tokens, test_errors, test_fake_deployments):
                t.run(fn, c, d)
    sys.exit(t.done())


main()
