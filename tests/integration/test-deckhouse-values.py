#!/usr/bin/env python3
"""deckhouse/modules/030-cloud-provider-cloudnode/openapi: every x-examples entry of both schemas
validates against its schema, and broken values are rejected with the schema's message."""
import copy
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
import d8module  # noqa: E402
from cntap import Tap  # noqa: E402


def test_examples(t):
    for name in ("config-values.yaml", "values.yaml"):
        examples = d8module.load(name).get("x-examples") or []
        t.ok(len(examples) >= 2, "%s has x-examples" % name)
        for i, ex in enumerate(examples):
            t.eq(d8module.errors(name, d8module.with_defaults(name, ex)), [],
                 "%s x-examples[%d] is valid" % (name, i))


def broken(mutate, example=0):
    v = copy.deepcopy(d8module.load("values.yaml")["x-examples"][example])
    mutate(v["internal"]["providerClusterConfiguration"])
    return v


def pve(mutate):
    """The Proxmox VE example (x-examples[2]) broken by mutate."""
    return broken(mutate, 2)


def test_rejected(t):
    # (what is wrong, the values, a fragment of the schema's message)
    cases = [
        ("an unknown cloud", broken(lambda p: p["provider"].update(name="gce")),
         "'gce' is not one of ['hetzner', 'openstack', 'proxmoxve']"),
        ("hetzner without a token", broken(lambda p: p["provider"]["credentials"].pop("token")
                                           or p["provider"]["credentials"].update(username="u")),
         "is not valid under any of the given schemas"),
        ("no masterNodeGroup", broken(lambda p: p.pop("masterNodeGroup")),
         "'masterNodeGroup' is a required property"),
        ("a plain-http endpoint", broken(lambda p: p["provider"].update(endpoint="http://api.example.com")),
         "does not match"),
        ("an endpoint with a newline", broken(lambda p: p["provider"].update(endpoint="https://a\nb")),
         "does not match"),
        ("an instance class of two clouds", broken(lambda p: p["masterNodeGroup"]["instanceClass"].update(
            openstack={"flavor": "m1", "image": "debian"})), "has too many properties"),
        ("an unknown field", broken(lambda p: p.update(extra=1)),
         "Additional properties are not allowed ('extra' was unexpected)"),
        ("an upper-case node group", broken(lambda p: p["nodeGroups"][0].update(name="Worker")), "does not match"),
        ("zero masters", broken(lambda p: p["masterNodeGroup"].update(replicas=0)), "is less than the minimum of 1"),
        ("an oversized token", broken(lambda p: p["provider"]["credentials"].update(token="x" * 100000)),
         "is too long"),
        ("proxmoxve without a region", pve(lambda p: p["provider"].pop("region")),
         "is not valid under any of the given schemas"),
        ("proxmoxve without an endpoint", pve(lambda p: p["provider"].pop("endpoint")),
         "is not valid under any of the given schemas"),
        ("proxmoxve with a token id but no secret", pve(lambda p: p["provider"]["credentials"].pop("tokenSecret")),
         "is not valid under any of the given schemas"),
        ("proxmoxve with both a token and a password", pve(lambda p: p["provider"]["credentials"].update(
            username="root@pam", password="pw")), "is not valid under any of the given schemas"),
        ("proxmoxve with a user without a realm", pve(lambda p: [p["provider"]["credentials"].pop(k) for k in (
            "tokenID", "tokenSecret")] and p["provider"]["credentials"].update(username="root", password="pw")),
         "is not valid under any of the given schemas"),
        ("a Proxmox VE token id without a token name", pve(lambda p: p["provider"]["credentials"].update(
            tokenID="deckhouse@pve")), "does not match"),
        ("a token secret of two lines", pve(lambda p: p["provider"]["credentials"].update(tokenSecret="a\nb")),
         "does not match"),
        ("a short fingerprint", pve(lambda p: p["provider"]["credentials"].update(fingerprint="AA:BB")),
         "does not match"),
        ("a Proxmox VE instance class without templateID", pve(
            lambda p: p["masterNodeGroup"]["instanceClass"]["proxmoxve"].pop("templateID")),
         "'templateID' is a required property"),
        ("a template VMID below 100", pve(
            lambda p: p["masterNodeGroup"]["instanceClass"]["proxmoxve"].update(templateID=99)),
         "99 is less than the minimum of 100"),
        ("a node name with a slash", pve(
            lambda p: p["nodeGroups"][0]["instanceClass"]["proxmoxve"].update(target="pve/2")), "does not match"),
        ("a tag cloudnode gives its machines", pve(
            lambda p: p["nodeGroups"][0]["instanceClass"]["proxmoxve"].update(tags=["cloudnode-machine-x"])),
         "should not be valid under"),
        ("an unknown Proxmox VE field", pve(
            lambda p: p["nodeGroups"][0]["instanceClass"]["proxmoxve"].update(cores=2)),
         "Additional properties are not allowed ('cores' was unexpected)"),
    ]
    for what, values, message in cases:
        errs = d8module.errors("values.yaml", values)
        t.ok(errs and any(message in e for e in errs), "values.yaml rejects %s with the schema's message" % what,
             "\n".join(errs) or "accepted")
    errs = d8module.errors("config-values.yaml", {"logLevel": 9})
    t.ok(any("9 is greater than the maximum of 6" in e for e in errs), "config-values.yaml rejects logLevel 9",
         "\n".join(errs))
    errs = d8module.errors("config-values.yaml", {"cni": "weave"})
    t.ok(any("'weave' is not one of" in e for e in errs), "config-values.yaml rejects an unknown cni", "\n".join(errs))


def test_werf_images(t):
    """images/<component>/werf.inc.yaml (Stapel): the Go template expressions stand in for werf's
    values, the documents are YAML, and each builds what the Containerfile's stage of the same
    name builds: the same program, entrypoint and user."""
    import re
    import yaml
    from cntap import src
    with open(src("Containerfile")) as f:
        containerfile = f.read()
    for component in ("cloudnode-controller", "cloudnode-initializer"):
        path = os.path.join(d8module.MODULE, "images", component, "werf.inc.yaml")
        with open(path) as f:
            text = re.sub(r"\{\{[^}]*\}\}", "TEMPLATE", f.read())
        docs = [d for d in yaml.safe_load_all(text) if d]
        t.eq(len(docs), 2, "%s: a build image and the final image" % component)
        if len(docs) != 2:
            continue
        build, final = docs
        install = "\n".join(build["shell"]["install"])
        program = "%s/%s" % (component.split("-")[1], component)
        t.ok("make -j\"$(nproc)\" %s" % program in install and
             "sh packaging/image-rootfs.sh /out/%s %s" % (component, program) in install
             and "packaging/image-build-deps" in install,
             "%s: built and packed as the Containerfile does" % component)
        t.ok(program.split("/")[1] in containerfile and
             "sh packaging/image-rootfs.sh /out/%s %s" % (component, program) in containerfile,
             "%s: the Containerfile has the same step" % component)
        t.eq((final["import"][0]["add"], final["docker"]["ENTRYPOINT"], final["docker"]["USER"]),
             ("/out/" + component, ["/usr/bin/" + component], "65532:65532"),
             "%s: the final image has the program's root, entrypoint and user" % component)
        stage = containerfile.split("AS %s\n" % component)[1].split("\n\n")[0]
        t.ok('ENTRYPOINT ["/usr/bin/%s"]' % component in stage and "USER 65532:65532" in stage,
             "%s: as the Containerfile's stage" % component)


def main():
    t = Tap()
    try:
        import jsonschema  # noqa: F401
    except ImportError:
        t.skip_all("python3-jsonschema is not installed")
    t.run(test_examples)
    t.run(test_rejected)
    t.run(test_werf_images)
    sys.exit(t.done())


if __name__ == "__main__":
    main()
