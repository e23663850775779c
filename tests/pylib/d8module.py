"""The Deckhouse module of cloudnode (deckhouse/modules/030-cloud-provider-cloudnode) for the tests:
its OpenAPI value schemas as addon-operator reads them (values.yaml extends config-values.yaml
through x-extend), their validation, and the real helm (tests/helm/build.sh)."""
import base64
import copy
import os
import shutil
import subprocess

import yaml
from cntap import src

MODULE = src("deckhouse", "modules", "030-cloud-provider-cloudnode")
HELM_BUILD = src("tests", "helm", "build.sh")
# What addon-operator passes besides the module's own values: the registry and the digests werf
# built for images/<component>.
GLOBAL = {"modulesImages": {"registry": {"base": "registry.example.com/deckhouse/modules", "dockercfg": base64.b64encode(
    b'{"auths":{"registry.example.com":{"auth":"dXNlcjpwYXNz"}}}').decode()},
                            "digests": {"cloudProviderCloudnode": {
                                "cloudnodeController": "sha256:" + "1" * 64,
                                "cloudnodeInitializer": "sha256:" + "2" * 64}}},
          "enabledModules": ["cloud-provider-cloudnode", "node-manager"]}


def load(name):
    with open(os.path.join(MODULE, "openapi", name)) as f:
        return yaml.safe_load(f)


def schema(name):
    """The schema of openapi/NAME with x-extend resolved: the extended schema's properties are
    merged under the file's own (addon-operator's rule), its x-examples are not inherited."""
    s = load(name)
    ext = s.pop("x-extend", None)
    if ext:
        base = schema(ext["schema"])
        base.pop("x-examples", None)
        props = dict(base.get("properties", {}))
        props.update(s.get("properties", {}))
        merged = dict(base)
        merged.update(s)
        merged["properties"] = props
        s = merged
    return s


def validator(name):
    import jsonschema
    s = copy.deepcopy(schema(name))
    s.pop("x-examples", None)
    return jsonschema.Draft4Validator(s)


def errors(name, values):
    """The schema's messages for values, one string per error ("path: message"), [] when valid."""
    return ["%s: %s" % ("/".join(str(p) for p in e.absolute_path) or ".", e.message)
            for e in sorted(validator(name).iter_errors(values), key=lambda e: list(e.absolute_path))]


def with_defaults(name, values):
    """values with the schema's top-level defaults filled in, as addon-operator does."""
    out = copy.deepcopy(values)
    for k, p in schema(name).get("properties", {}).items():
        if k not in out and "default" in p:
            out[k] = copy.deepcopy(p["default"])
    return out


def helm():
    """(path of the real helm, None), or (None, why) when it cannot be built here (exit 77)."""
    r = subprocess.run(["sh", HELM_BUILD], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode == 0:
        return r.stdout.strip(), None
    why = " ".join(r.stderr.split())[-300:]
    if r.returncode == 77:
        return None, why
    raise RuntimeError("tests/helm/build.sh failed: " + why)


def chart_copy(dest):
    """The module as a chart Helm can read without Deckhouse's helm_lib: a copy with its symlinks
    resolved, without charts/ (whose helm_lib link resolves only inside a Deckhouse tree)."""
    shutil.copytree(MODULE, dest, symlinks=False, ignore=lambda d, names: ["charts"] if d == MODULE else [])
    return dest
