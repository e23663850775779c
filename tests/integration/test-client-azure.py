#!/usr/bin/env python3
"""Microsoft's own CLI, `az` (Debian's azure-cli, on MSAL and the Azure SDK), against the fake
Resource Manager and Entra ID, for what a user does with it every day: register a custom cloud
given its Resource Manager endpoint alone (the rest is read from ARM's metadata/endpoints), log in
as a service principal with a client secret, list subscriptions and resource groups, list and show
virtual machines and their instance view, read their network interfaces and public IP addresses,
stop, deallocate and start a VM (following the long-running operation), delete one, create VMs
with `az vm create` (the template deployment it writes), and change their tags. Every
change is also checked in the fake's inventory, so a client that only prints does not pass.

The fake is served over HTTPS with a test CA, which az trusts through REQUESTS_CA_BUNDLE; nothing
turns verification off. Entra ID is the authority host login.microsoftonline.com itself (MSAL asks
Microsoft's instance discovery about any other authority host, and the real service knows no test
host): az reaches it through an egress proxy of the test's own that tunnels that name, and only
that name, to the fake and refuses every other destination, and the test checks that az asked
for no other. Skipped when az is not installed."""
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from cliclient import Cli, wait_for  # noqa: E402
from cntap import Tap  # noqa: E402
from egressproxy import EgressProxy  # noqa: E402
from fakecloud import FakeCloud  # noqa: E402

# Debian's azure-cli; a user's own az on PATH (a pip install) is not what is judged.
AZ = "/usr/bin/az" if os.access("/usr/bin/az", os.X_OK) else shutil.which("az")
AUTHORITY = "login.microsoftonline.com"
TENANT = "72f988bf-86f1-41af-91ab-2d7cd011db47"
SUBSCRIPTION = "8d10da13-8125-4ba9-a717-bf7490507b3d"
RG = "cloudnode-rg"
# Azure Stack Hub's API profile, as its users register their cloud: the SDK of Debian's
# azure-cli lacks the Compute API version of the default profile (latest), so every vm command
# fails there with "No module named 'azure.mgmt.compute.v2022_11_01'" against any cloud.
PROFILE = "2020-09-01-hybrid"
NETWORK_API = "2018-11-01"
# az's own version check, run once a day: a probe of this host, which the proxy refuses.
VERSION_PROBE = "CONNECT azure.microsoft.com:443 HTTP/1.0"
APP = {"client_id": "3f0b6c54-6b4e-4a43-9d36-1d8e4c0b5a11", "secret": "az-cli-test-secret"}


def az(t, home, c, proxy):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AZURE_", "MSAL_"))}
    env.update(HOME=home, AZURE_CONFIG_DIR=os.path.join(home, ".azure"), REQUESTS_CA_BUNDLE=c.ca_file,
               HTTPS_PROXY=proxy.url, HTTP_PROXY=proxy.url, NO_PROXY="127.0.0.1",
               AZURE_CORE_COLLECT_TELEMETRY="false", AZURE_CORE_NO_COLOR="true", AZURE_CORE_ONLY_SHOW_ERRORS="true",
               AZURE_CORE_SURVEY_MESSAGE="false")
    for k in ("https_proxy", "http_proxy", "no_proxy", "all_proxy", "ALL_PROXY", "CURL_CA_BUNDLE"):
        env.pop(k, None)
    return Cli(t, [AZ], env, ["--output", "json"], timeout=180)


def azure_vms(c, **match):
    return [i for i in c.instances() if i["platform"] == "azure" and all(i.get(k) == v for k, v in match.items())]


def login(t, a, c, proxy):
    a.ok("cloud register (Resource Manager endpoint only)", "cloud", "register", "--name", "FakeAzure",
         "--endpoint-resource-manager", c.url + "/arm/", "--profile", PROFILE)
    cloud = a.json("cloud show", "cloud", "show", "--name", "FakeAzure") or {}
    ep = cloud.get("endpoints") or {}
    t.eq((ep.get("activeDirectory"), ep.get("activeDirectoryResourceId")),
         ("https://%s/" % AUTHORITY, c.url + "/arm/"), "authority and audience read from ARM's metadata/endpoints")
    a.ok("cloud set", "cloud", "set", "--name", "FakeAzure")
    rc, out = a.run("login", "--service-principal", "--username", APP["client_id"], "--password", "not-the-secret",
                    "--tenant", TENANT)
    t.ok(rc != 0 and "AADSTS7000215" in out, "a wrong client secret is refused by Entra ID", out[-600:])
    subs = a.json("login --service-principal", "login", "--service-principal", "--username", APP["client_id"],
                  "--password", APP["secret"], "--tenant", TENANT) or []
    t.eq([(s.get("id"), s.get("tenantId"), s.get("name"), s.get("state")) for s in subs],
         [(SUBSCRIPTION, TENANT, "cloudnode-test", "Enabled")], "logged in: one subscription, enabled")
    t.ok(proxy.tunnels > 0, "the token came from the authority host, through the egress proxy", proxy.tunnels)
    acct = a.json("account show", "account", "show") or {}
    t.eq(((acct.get("user") or {}).get("type"), (acct.get("user") or {}).get("name"), acct.get("environmentName")),
         ("servicePrincipal", APP["client_id"], "FakeAzure"), "the account is the service principal in FakeAzure")
    tok = a.json("account get-access-token", "account", "get-access-token") or {}
    t.ok(bool(tok.get("accessToken")) and tok.get("tenant") == TENANT, "an access token for the tenant",
         {k: v for k, v in tok.items() if k != "accessToken"})
    groups = a.json("group list", "group", "list") or []
    t.eq([(g.get("name"), g.get("location")) for g in groups], [(RG, "westeurope")], "group list")
    g = a.json("group show", "group", "show", "--name", RG) or {}
    t.eq((g.get("properties") or {}).get("provisioningState"), "Succeeded", "group show")
    rc, out = a.run("group", "show", "--name", "nosuch-rg")
    t.ok(rc != 0 and "ResourceGroupNotFound" in out, "an unknown resource group is ResourceGroupNotFound", out[-400:])


def vms(t, a, c):
    w1 = c.add_instance({"platform": "azure", "name": "web-1", "labels": {"team": "a"}})
    w2 = c.add_instance({"platform": "azure", "name": "web-2", "zone": "", "public_ipv4": None})
    listed = a.json("vm list", "vm", "list", "--resource-group", RG) or []
    t.eq(sorted((v.get("name"), v.get("hardwareProfile", {}).get("vmSize"), v.get("location")) for v in listed),
         sorted((i["name"], i["type"], i["region"]) for i in (w1, w2)), "vm list: both VMs, size and location")
    v = a.json("vm show", "vm", "show", "--resource-group", RG, "--name", "web-1") or {}
    t.eq((v.get("vmId"), v.get("zones"), v.get("tags"), v.get("provisioningState")),
         (w1["id"], [w1["zone"]], {"team": "a"}, "Succeeded"), "vm show: id, zone, tags")
    nic_id = ((v.get("networkProfile") or {}).get("networkInterfaces") or [{}])[0].get("id", "")
    t.ok(nic_id.endswith("/networkInterfaces/web-1-nic"), "vm show names its NIC", nic_id)
    view = a.json("vm get-instance-view", "vm", "get-instance-view", "--resource-group", RG, "--name", "web-1") or {}
    codes = [s.get("code") for s in (view.get("instanceView") or {}).get("statuses") or []]
    t.ok("PowerState/running" in codes, "the instance view says running", codes)

    # `network nic show` and `network public-ip show` of Debian's azure-cli fail before any request
    # (its SDK lacks the operations of their API versions in either profile): the generic
    # `resource show` reads the same resources, by the ids the VM and the NIC name.
    nic = (a.json("resource show (the VM's NIC)", "resource", "show", "--ids", nic_id, "--api-version",
                  NETWORK_API) or {}).get("properties") or {}
    ipc = nic.get("ipConfigurations") or [{}]
    t.eq(((ipc[0].get("properties") or {}).get("privateIPAddress"), nic.get("macAddress")),
         (w1["private_ipv4"], w1["mac"].replace(":", "-").upper()), "the NIC: private address and MAC")
    pip_id = ((ipc[0].get("properties") or {}).get("publicIPAddress") or {}).get("id", "")
    t.ok(pip_id.endswith("/publicIPAddresses/web-1-ip"), "the NIC names its public IP", pip_id)
    pip = (a.json("resource show (the NIC's public IP)", "resource", "show", "--ids", pip_id or "-",
                  "--api-version", NETWORK_API) or {}).get("properties") or {}
    t.eq((pip.get("ipAddress"), pip.get("publicIPAllocationMethod")), (w1["public_ipv4"], "Static"),
         "the public IP: its address")
    nics = a.json("network nic list", "network", "nic", "list", "--resource-group", RG) or []
    t.eq(sorted(n.get("name") for n in nics), ["web-1-nic", "web-2-nic"], "network nic list")
    pips = a.json("network public-ip list", "network", "public-ip", "list", "--resource-group", RG) or []
    t.eq([p.get("name") for p in pips], ["web-1-ip"], "network public-ip list: only the VM that has one")
    rc, out = a.run("vm", "show", "--resource-group", RG, "--name", "nosuch")
    t.ok(rc != 0 and "ResourceNotFound" in out, "an unknown VM is ResourceNotFound", out[-400:])

    a.ok("vm stop (powerOff, waits for the operation)", "vm", "stop", "--resource-group", RG, "--name", "web-1")
    t.eq([i["status"] for i in azure_vms(c, name="web-1")], ["stopped"], "stopped in the inventory")
    view = a.json("vm get-instance-view (stopped)", "vm", "get-instance-view", "-g", RG, "-n", "web-1") or {}
    t.ok("PowerState/stopped" in [s.get("code") for s in (view.get("instanceView") or {}).get("statuses") or []],
         "the instance view says stopped", view.get("instanceView"))
    a.ok("vm deallocate", "vm", "deallocate", "--resource-group", RG, "--name", "web-1")
    t.eq([(i.get("extra") or {}).get("azure_deallocated") for i in azure_vms(c, name="web-1")], [True],
         "deallocated in the inventory")
    a.ok("vm start", "vm", "start", "--resource-group", RG, "--name", "web-1")
    t.eq([i["status"] for i in azure_vms(c, name="web-1")], ["running"], "running again")

    a.ok("vm delete", "vm", "delete", "--resource-group", RG, "--name", "web-2", "--yes")
    t.ok(wait_for(lambda: not azure_vms(c, name="web-2")), "web-2 is gone from the inventory")
    t.eq([v.get("name") for v in a.json("vm list (after delete)", "vm", "list", "-g", RG) or []], ["web-1"],
         "vm list shows web-1 only")


def create_and_tag(t, a, c):
    """az vm create (an ARM template deployment az writes: NIC, public IP, NSG and the VM), in a
    zone, with tags and an SSH key; without a public IP or NSG; with an image the cloud does not
    have; then tags changed with az vm update, and the VM deleted."""
    key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBH3mSXo8MIEa6yYW4FeN4hHXvoNz4WdDugKvq4S0dJc ops@example"
    out = a.json("vm create (deployment: VM, NIC, public IP, NSG)", "vm", "create", "-g", RG, "-n", "app-1",
                 "--image", "Debian:debian-12:12-gen2:latest", "--size", "Standard_B2s", "--zone", "2",
                 "--admin-username", "azureuser", "--ssh-key-values", key, "--tags", "role=worker", "env=test") or {}
    made = azure_vms(c, name="app-1")
    t.eq(len(made), 1, "the VM is in the inventory")
    inst = made[0] if made else {}
    t.eq((inst.get("type"), inst.get("zone"), inst.get("labels"), inst.get("ssh_keys"), inst.get("image")),
         ("Standard_B2s", "2", {"role": "worker", "env": "test"}, [key], "Debian:debian-12:12-gen2"),
         "with the size, zone, tags, SSH key and image az asked for")
    t.eq((out.get("powerState"), out.get("zones"), out.get("privateIpAddress"), out.get("publicIpAddress")),
         ("VM running", "2", inst.get("private_ipv4"), inst.get("public_ipv4")),
         "az reports it running, with its zone and addresses")
    nic_id = (((a.json("vm show (created)", "vm", "show", "-g", RG, "-n", "app-1") or {}).get("networkProfile") or {})
              .get("networkInterfaces") or [{}])[0].get("id", "")
    nic = (a.json("resource show (its NIC)", "resource", "show", "--ids", nic_id or "-", "--api-version",
                  NETWORK_API) or {}).get("properties") or {}
    ipc = (nic.get("ipConfigurations") or [{}])[0].get("properties") or {}
    t.ok(nic_id.endswith("/networkInterfaces/app-1VMNic") and
         (ipc.get("publicIPAddress") or {}).get("id", "").endswith("/publicIPAddresses/app-1PublicIP") and
         (nic.get("networkSecurityGroup") or {}).get("id", "").endswith("/networkSecurityGroups/app-1NSG"),
         "its NIC, public IP and NSG have the names the template gave them", nic)

    out = a.json("vm create without public IP or NSG", "vm", "create", "-g", RG, "-n", "app-2", "--image",
                 "Debian:debian-12:12:latest", "--size", "Standard_D2s_v3", "--admin-username", "azureuser",
                 "--ssh-key-values", key, "--public-ip-address", "", "--nsg", "") or {}
    t.eq([(i.get("public_ipv4"), i.get("zone")) for i in azure_vms(c, name="app-2")], [(None, "")],
         "a VM with no public IP and no zone")
    t.eq(out.get("publicIpAddress"), "", "az reports no public IP")

    rc, out = a.run("vm", "create", "-g", RG, "-n", "app-3", "--image", "Debian:debian-99:99:latest", "--size",
                    "Standard_B2s", "--admin-username", "azureuser", "--ssh-key-values", key)
    t.ok(rc != 0 and "images referenced from the deployment template are not found" in out,
         "an image the cloud does not have: the deployment is refused", out[-600:])
    rc, out = a.run("vm", "create", "-g", RG, "-n", "app-3", "--image", "Debian:debian-12:12:latest", "--size",
                    "Standard_Huge", "--admin-username", "azureuser", "--ssh-key-values", key)
    t.ok(rc != 0 and "Standard_Huge is not available" in out, "a size the cloud does not offer is refused", out[-600:])
    t.eq(azure_vms(c, name="app-3"), [], "and no VM was made")

    a.ok("vm update --set tags.owner=ops", "vm", "update", "-g", RG, "-n", "app-1", "--set", "tags.owner=ops")
    t.eq([i["labels"] for i in azure_vms(c, name="app-1")], [{"role": "worker", "env": "test", "owner": "ops"}],
         "a tag added; the others kept")
    a.ok("vm update --remove tags.env", "vm", "update", "-g", RG, "-n", "app-1", "--remove", "tags.env")
    t.eq([i["labels"] for i in azure_vms(c, name="app-1")], [{"role": "worker", "owner": "ops"}], "a tag removed")
    t.eq((a.json("vm show (tags)", "vm", "show", "-g", RG, "-n", "app-1") or {}).get("tags"),
         {"role": "worker", "owner": "ops"}, "vm show has the tags")

    for name in ("app-1", "app-2"):
        a.ok("vm delete " + name, "vm", "delete", "-g", RG, "-n", name, "--yes")
    t.ok(wait_for(lambda: not azure_vms(c, name="app-1") and not azure_vms(c, name="app-2")),
         "the created VMs are gone from the inventory")


def main():
    t = Tap()
    if not AZ:
        t.skip_all("az (Debian package azure-cli) is not installed")
    with tempfile.TemporaryDirectory(prefix="cn-az-") as tmp:
        state = os.path.join(tmp, "cloud")
        with FakeCloud(state, tls_names=[AUTHORITY]) as c:
            c.settings(azure_service_principals=[APP])
            proxy = EgressProxy(int(c.url.rsplit(":", 1)[1]), [AUTHORITY])
            try:
                a = az(t, os.path.join(tmp, "home"), c, proxy)
                t.run(login, a, c, proxy)
                t.run(vms, a, c)
                t.run(create_and_tag, a, c)
                t.eq([r for r in proxy.refused if r != VERSION_PROBE], [],
                     "az asked the proxy for no destination but the authority host (and its version check)")
                logged = [r for r in c.requests() if r.get("platform") == "azure"]
                t.ok(not any(APP["secret"] in str(r) for r in logged), "the client secret is not in the request log")
            finally:
                proxy.shutdown()
                proxy.server_close()
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
