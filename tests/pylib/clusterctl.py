"""What `clusterctl init` does with a provider's components file before it applies it, for the tests
that install cloudnode as a Cluster API infrastructure provider: variable substitution as
clusterctl's yaml processor does it (drone/envsubst: `${VAR}`, `$VAR`, `${VAR:=default}`,
`${VAR:-default}` (default when unset or empty), `${VAR=default}` (when unset); a variable without a
value and without a default is an error that names every such variable), then the provider labels
on every object.

    text = substitute(open(path).read(), {"CLOUDNODE_B64ENCODED_CLOUD_CONF": ...})
    docs = components(path, env)        # the objects clusterctl would create
    required, defaults = variables(text)"""
import re

import yaml

PROVIDER_LABEL = "cluster.x-k8s.io/provider"
NAME = r"[A-Za-z_][A-Za-z0-9_]*"
# ${NAME}, ${NAME:=x}, ${NAME:-x}, ${NAME=x}, or a bare $NAME; anything else after "${" is an
# expression this processor does not implement (the components file must not use it).
REF = re.compile(r"\$\{(%s)(?:(:=|:-|=)([^}]*))?\}|\$(%s)|\$\{[^}]*\}?" % (NAME, NAME))


class MissingVariables(ValueError):
    def __init__(self, names):
        self.names = sorted(set(names))
        super().__init__("value for variables [%s] is not set. Please set the value using os environment "
                         "variables or the clusterctl config file" % ", ".join(self.names))


def _refs(text):
    for m in REF.finditer(text):
        if m.group(1) is None and m.group(4) is None:
            raise ValueError("unsupported variable expression %r" % m.group(0))
        yield m


def variables(text):
    """(names without a default, {name: default}) of the references in text."""
    required, defaults = set(), {}
    for m in _refs(text):
        if m.group(2):
            defaults[m.group(1)] = m.group(3)
        else:
            required.add(m.group(1) or m.group(4))
    return required - set(defaults), defaults


def substitute(text, env):
    missing = []

    def value(m):
        name, op, default = m.group(1) or m.group(4), m.group(2), m.group(3)
        v = env.get(name)
        if op in (":=", ":-") and not v:
            return default
        if op == "=" and v is None:
            return default
        if v is None:
            missing.append(name)
            return ""
        return v
    list(_refs(text))
    out = REF.sub(value, text)
    if missing:
        raise MissingVariables(missing)
    return out


def components(path, env, provider="infrastructure-cloudnode"):
    """The objects `clusterctl init` creates from the components file at path: substituted, each
    labelled with the provider (cluster.x-k8s.io/provider) and as clusterctl's (clusterctl.cluster.x-k8s.io)."""
    with open(path) as f:
        text = substitute(f.read(), env)
    docs = [d for d in yaml.safe_load_all(text) if d]
    for d in docs:
        labels = d.setdefault("metadata", {}).setdefault("labels", {}) or {}
        labels.update({PROVIDER_LABEL: provider, "clusterctl.cluster.x-k8s.io": ""})
        d["metadata"]["labels"] = labels
    return docs
