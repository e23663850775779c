"""Azure Resource Manager template deployments (Microsoft.Resources/deployments), as `az vm
create` uses them: PUT a deployment of an inline template (incremental mode), follow its
Azure-AsyncOperation, GET it. The template's resources are created in the fake's inventory: a
virtual machine (Microsoft.Compute/virtualMachines) becomes an instance, and the network
interface, public IP address and network security group it names become that instance's (the
fake derives those objects from its VM, under the names the template gave them). The template
language is evaluated as far as such templates use it: parameters (with their defaults), variables,
and the functions parameters, variables, concat, resourceId, resourceGroup, subscription, string,
toLower and toUpper. A template with another resource type or function fails the deployment with
ARM's error, as a real deployment of something this cloud does not have would.

Deployments live in the state under "azure_deployments"; a deployment of the same name is
replaced (ARM keeps the newest)."""
import base64
import re
import time
import uuid

from .state import StateError, add_instance
from .web import Response, json_response

VM = "microsoft.compute/virtualmachines"
NIC = "microsoft.network/networkinterfaces"
PIP = "microsoft.network/publicipaddresses"
NSG = "microsoft.network/networksecuritygroups"
VNET = "microsoft.network/virtualnetworks"


class TemplateError(Exception):
    """An invalid template: a failed deployment, or (preflight) a 400 to the PUT itself."""

    def __init__(self, code, message, preflight=False):
        super().__init__(message)
        self.code, self.message, self.preflight = code, message, preflight


def arm_error(status, code, message):
    return json_response({"error": {"code": code, "message": message}}, status, "application/json; charset=utf-8")


# -- template language ----------------------------------------------------------------------

_TOKEN = re.compile(r"\s*(?:('(?:[^']|'')*')|(-?\d+)|([A-Za-z_][A-Za-z0-9_]*)|(.))")


def _tokens(text):
    pos, out = 0, []
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            break
        pos = m.end()
        s, n, ident, ch = m.groups()
        if s is not None:
            out.append(("str", s[1:-1].replace("''", "'")))
        elif n is not None:
            out.append(("num", int(n)))
        elif ident is not None:
            out.append(("id", ident))
        elif ch and not ch.isspace():
            out.append(("op", ch))
    return out


class Evaluator:
    def __init__(self, ctx, template, given):
        self.ctx = ctx
        self.params = {}
        for k, spec in (template.get("parameters") or {}).items():
            if k in given:
                self.params[k] = (given[k] or {}).get("value")
            elif isinstance(spec, dict) and "defaultValue" in spec:
                self.params[k] = spec["defaultValue"]
            else:
                raise TemplateError("InvalidTemplate", "Deployment template validation failed: 'The value for the "
                                    "template parameter '%s' is not provided.'" % k)
        self.raw_vars = template.get("variables") or {}
        self.vars = {}

    def value(self, v):
        if isinstance(v, str) and v.startswith("[") and v.endswith("]") and not v.startswith("[["):
            toks = _tokens(v[1:-1])
            result, rest = self.expr(toks)
            if rest:
                raise TemplateError("InvalidTemplate", "The template language expression '%s' is not valid." % v)
            return result
        if isinstance(v, str) and v.startswith("[["):
            return v[1:]
        if isinstance(v, dict):
            return {k: self.value(x) for k, x in v.items()}
        if isinstance(v, list):
            return [self.value(x) for x in v]
        return v

    def expr(self, toks):
        if not toks:
            raise TemplateError("InvalidTemplate", "An empty template language expression.")
        kind, val = toks[0]
        toks = toks[1:]
        if kind in ("str", "num"):
            result = val
        elif kind == "id" and toks[:1] == [("op", "(")]:
            args, toks = [], toks[1:]
            while toks[:1] != [("op", ")")]:
                a, toks = self.expr(toks)
                args.append(a)
                if toks[:1] == [("op", ",")]:
                    toks = toks[1:]
                elif toks[:1] != [("op", ")")]:
                    raise TemplateError("InvalidTemplate", "A function's arguments are not separated by ','.")
            toks = toks[1:]
            result = self.call(val, args)
        else:
            raise TemplateError("InvalidTemplate", "Unexpected '%s' in a template language expression." % (val,))
        while toks[:1] in ([("op", ".")], [("op", "[")]):
            if toks[0] == ("op", "."):
                if len(toks) < 2 or toks[1][0] != "id":
                    raise TemplateError("InvalidTemplate", "A property name must follow '.'.")
                result, toks = self.member(result, toks[1][1]), toks[2:]
            else:
                key, toks = self.expr(toks[1:])
                if toks[:1] != [("op", "]")]:
                    raise TemplateError("InvalidTemplate", "An index is not closed with ']'.")
                result, toks = self.member(result, key), toks[1:]
        return result, toks

    @staticmethod
    def member(obj, key):
        try:
            return obj[key]
        except (KeyError, IndexError, TypeError):
            raise TemplateError("InvalidTemplate", "The language expression property '%s' doesn't exist." % key)

    def call(self, fn, args):
        f = fn.lower()
        if f == "parameters":
            if args[0] not in self.params:
                raise TemplateError("InvalidTemplate", "The template parameter '%s' is not found." % args[0])
            return self.params[args[0]]
        if f == "variables":
            name = args[0]
            if name not in self.vars:
                if name not in self.raw_vars:
                    raise TemplateError("InvalidTemplate", "The template variable '%s' is not found." % name)
                self.vars[name] = self.value(self.raw_vars[name])
            return self.vars[name]
        if f == "concat":
            if args and all(isinstance(a, list) for a in args):
                return [x for a in args for x in a]
            return "".join(str(a) for a in args)
        if f == "resourceid":
            if len(args) < 2:
                raise TemplateError("InvalidTemplate", "resourceId needs a type and a name.")
            rtype, names = args[0], args[1:]
            ns, _, types = rtype.partition("/")
            path = ns
            for t, n in zip(types.split("/"), names):
                path += "/%s/%s" % (t, n)
            return "%s/providers/%s" % (self.ctx["rg_id"], path)
        if f == "resourcegroup":
            return {"id": self.ctx["rg_id"], "name": self.ctx["rg"], "location": self.ctx["location"],
                    "properties": {"provisioningState": "Succeeded"}}
        if f == "subscription":
            return {"id": "/subscriptions/" + self.ctx["subscription"], "subscriptionId": self.ctx["subscription"],
                    "tenantId": self.ctx["tenant"]}
        if f == "string":
            return str(args[0])
        if f == "tolower":
            return str(args[0]).lower()
        if f == "toupper":
            return str(args[0]).upper()
        raise TemplateError("InvalidTemplate", "The template function '%s' is not expected." % fn)


# -- deployments ----------------------------------------------------------------------------

def _name_of(rid):
    return (rid or "").rstrip("/").rsplit("/", 1)[-1]


def deploy(api, ctx, template, given):
    """Evaluates the template and creates its resources; returns the ids of what it made."""
    ev = Evaluator(ctx, template, given)
    resources = [ev.value(r) for r in template.get("resources") or []]
    by_type = {}
    for r in resources:
        rtype = str(r.get("type") or "").lower()
        if rtype not in (VM, NIC, PIP, NSG, VNET):
            raise TemplateError("NoRegisteredProviderFound", "No registered resource provider found for location "
                                "'%s' and type '%s'." % (r.get("location"), r.get("type")))
        by_type.setdefault(rtype, {})[str(r.get("name"))] = r
    for name, vnet in (by_type.get(VNET) or {}).items():
        if name != "cloudnode-vnet":
            raise TemplateError("InvalidTemplateDeployment", "The virtual network '%s' cannot be created: this "
                                "subscription's quota allows one virtual network per region." % name)
    # Pre-flight validation, before anything is created: what Resource Manager refuses with 400.
    for name, vm in (by_type.get(VM) or {}).items():
        problem = api.vm_problem(name, vm)
        if problem:
            raise TemplateError("InvalidTemplateDeployment", "The template deployment failed with error: '%s'."
                                % problem, preflight=True)
    made = []
    for name, vm in (by_type.get(VM) or {}).items():
        made.append(api.put_vm(ctx["req"], name, vm, by_type))
    for rtype, objs in by_type.items():
        if rtype == VM:
            continue
        for name in objs:
            made.append("%s/providers/%s/%s" % (ctx["rg_id"], objs[name]["type"], name))
    return made


def handle(api, req, parts, versions, ctx):
    """parts: after .../providers/Microsoft.Resources/deployments/."""
    version = req.query.get("api-version")
    if version not in versions:
        return api.bad_version(version, "Microsoft.Resources", "deployments", versions)
    name = parts[0]
    if not re.fullmatch(r"[-\w.()]{1,64}", name):
        return arm_error(400, "InvalidDeploymentName", "The deployment name '%s' is invalid." % name)
    did = "%s/providers/Microsoft.Resources/deployments/%s" % (ctx["rg_id"], name)
    if len(parts) == 3 and parts[1].lower() == "operationstatuses" and req.method == "GET":
        dep = (api.state.read().get("azure_deployments") or {}).get(name)
        if not dep or dep["operation"] != parts[2]:
            return arm_error(404, "DeploymentNotFound", "Deployment '%s' could not be found." % name)
        return json_response({"status": dep["properties"]["provisioningState"]} if not dep.get("error") else
                             {"status": "Failed", "error": dep["error"]})
    if len(parts) != 1:
        return arm_error(404, "NotFound", "The requested resource does not exist.")
    if req.method == "GET":
        dep = (api.state.read().get("azure_deployments") or {}).get(name)
        if not dep:
            return arm_error(404, "DeploymentNotFound", "Deployment '%s' could not be found." % name)
        return json_response({"id": did, "name": name, "type": "Microsoft.Resources/deployments",
                              "properties": dep["properties"]})
    if req.method != "PUT":
        return arm_error(405, "MethodNotAllowed", "The HTTP method '%s' is not supported." % req.method)
    props = (req.json() or {}).get("properties")
    if not isinstance(props, dict) or not isinstance(props.get("template"), dict):
        return arm_error(400, "InvalidRequestContent", "The request content was invalid and could not be "
                         "deserialized: 'properties.template' is required (templateLink is not supported here).")
    if str(props.get("mode", "")).lower() != "incremental":
        return arm_error(400, "InvalidDeploymentMode", "Only the Incremental deployment mode is available here.")
    now = time.strftime("%Y-%m-%dT%H:%M:%S.0000000Z", time.gmtime())
    op = str(uuid.uuid4())
    state = {"provisioningState": "Succeeded", "mode": "Incremental", "timestamp": now, "duration": "PT1S",
             "correlationId": str(uuid.uuid4()), "templateHash": str(abs(hash(str(props["template"])))),
             "outputs": {}, "outputResources": [], "providers": [], "dependencies": []}
    error = None
    try:
        state["outputResources"] = [{"id": rid} for rid in
                                    deploy(api, ctx, props["template"], props.get("parameters") or {})]
    except TemplateError as e:
        if e.preflight:
            return arm_error(400, e.code, e.message)
        error = {"code": e.code, "message": e.message}
        state["provisioningState"] = "Failed"
        state["error"] = error
    except StateError as e:
        error = {"code": "ResourceDeploymentFailure", "message": e.message}
        state["provisioningState"] = "Failed"
        state["error"] = error
    # Secure parameters are never given back; others are, with their type.
    params = {}
    for k, spec in ((props["template"].get("parameters")) or {}).items():
        ptype = (spec or {}).get("type", "string") if isinstance(spec, dict) else "string"
        if ptype.lower() not in ("securestring", "secureobject"):
            params[k] = {"type": ptype, "value": ((props.get("parameters") or {}).get(k) or {}).get("value")}
    state["parameters"] = params
    with api.state.locked() as st:
        st.setdefault("azure_deployments", {})[name] = {"properties": state, "operation": op, "error": error}
    accepted = dict(state, provisioningState="Accepted")
    op_url = "%s/arm%s/operationStatuses/%s?api-version=%s" % (req.base_url, did, op, version)
    return Response(201, json_response({"id": did, "name": name, "type": "Microsoft.Resources/deployments",
                                        "properties": accepted}).body, "application/json; charset=utf-8",
                    headers=[("Azure-AsyncOperation", op_url), ("Retry-After", "0")])


def vm_spec(vm, by_type):
    """The inventory fields of a VM resource of a template (or a PUT body) and the NIC, public IP
    and NSG of the template that it names."""
    props = vm.get("properties") or {}
    osp = props.get("osProfile") or {}
    keys = [k.get("keyData") for k in
            (((osp.get("linuxConfiguration") or {}).get("ssh") or {}).get("publicKeys") or []) if k.get("keyData")]
    image = ((props.get("storageProfile") or {}).get("imageReference") or {})
    user_data = props.get("userData") or osp.get("customData")
    spec = {"type": (props.get("hardwareProfile") or {}).get("vmSize"),
            "labels": dict(vm.get("tags") or {}), "ssh_keys": keys,
            "image": "%s:%s:%s" % (image.get("publisher"), image.get("offer"), image.get("sku")) if image else None,
            "hostname": osp.get("computerName"), "region": vm.get("location"),
            "user_data": base64.b64decode(user_data).decode("utf-8", "replace") if user_data else None}
    zones = vm.get("zones") or []
    spec["zone"] = str(zones[0]) if zones else ""
    extra = {}
    nics = (props.get("networkProfile") or {}).get("networkInterfaces") or []
    if nics:
        nic_name = _name_of(nics[0].get("id"))
        extra["azure_nic"] = nic_name
        nic = (by_type.get(NIC) or {}).get(nic_name) or {}
        ipcs = (nic.get("properties") or {}).get("ipConfigurations") or []
        if ipcs:
            extra["azure_ipconfig"] = ipcs[0].get("name")
            pip = ((ipcs[0].get("properties") or {}).get("publicIPAddress") or {}).get("id")
            if pip:
                extra["azure_pip"] = _name_of(pip)
            elif nic:
                spec["public_ipv4"] = None
        nsg = ((nic.get("properties") or {}).get("networkSecurityGroup") or {}).get("id")
        if nsg:
            extra["azure_nsg"] = _name_of(nsg)
    return {k: v for k, v in spec.items() if v is not None or k == "public_ipv4"}, extra


def create_vm(state, name, vm, by_type):
    spec, extra = vm_spec(vm, by_type)
    if not spec.get("type"):
        raise StateError(400, "properties.hardwareProfile.vmSize is required")
    # The resource group's network is IPv4 only (10.0.0.0/16).
    spec.update(platform="azure", name=name, extra=extra, source="api", ipv6=None)
    with state.locked() as st:
        return add_instance(st, {k: v for k, v in spec.items() if k != "source"}, "api")
