"""GET /openapi/v2: the Swagger 2.0 document, as JSON or in the protobuf encoding of gnostic's
openapi.v2.Document, which kubectl up to 1.26 fetches (Accept
application/com.github.proto-openapi.spec.v2@v1.0+protobuf) before every create and apply to
validate objects on the client side. The protobuf form goes out as application/octet-stream, as
the real server sends it (Go's media type parser refuses the "@" of the requested type).

Like /openapi/v3 here (registry.openapi_doc), the document carries no field schemas of the
built-in kinds: each custom resource kind has a definition whose only content is its
x-kubernetes-group-version-kind, which kubectl reads as "any object of this kind". kubectl then
leaves field validation to the server, which validates custom resources against their CRD schema
itself. Built-in kinds are left out altogether, so that kubectl's strategic merge patches keep
coming from its compiled-in types, as against a real server."""
import json

PROTOBUF = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"


def document(reg):
    """The document as a dict (its JSON form): the paths of /openapi/v3 in Swagger 2.0 form
    (kubectl 1.20 looks for the dryRun parameter of a kind's patch operation there before a
    server-side dry run), and a definition per custom resource kind."""
    from .registry import openapi_doc
    paths = {}
    gvs = [("", "v1")] + [(g, v) for g, vs, _ in reg.groups() for v in vs]
    for g, v in gvs:
        doc = openapi_doc(reg, g, v)
        for path, item in (doc or {}).get("paths", {}).items():
            paths[path] = {verb: dict(op, parameters=[{"name": q["name"], "in": q["in"], "type": q["schema"]["type"],
                                                       "uniqueItems": q["schema"]["uniqueItems"]}
                                                      for q in op["parameters"]])
                           for verb, op in item.items()}
    definitions = {}
    for t in reg.all():
        if t.crd is None:
            continue
        for version in t.versions:
            name = "%s.%s.%s" % (".".join(reversed(t.group.split("."))), version, t.kind)
            definitions[name] = {
                "description": "%s is a custom resource; the server validates its fields." % t.kind,
                "x-kubernetes-group-version-kind": [{"group": t.group, "version": version, "kind": t.kind}],
            }
    return {"swagger": "2.0", "info": {"title": "Kubernetes", "version": "v1.32.0"}, "paths": paths,
            "definitions": definitions}


# --- protobuf encoding (proto3 wire format) ---------------------------------------------------

def _varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _field(num, payload):
    """A length-delimited field (strings and embedded messages)."""
    if isinstance(payload, str):
        payload = payload.encode()
    return _varint(num << 3 | 2) + _varint(len(payload)) + payload


def _named_any(name, value):
    # NamedAny{1: name, 2: Any{2: yaml}}; JSON is YAML, and kubectl reads the value as YAML.
    return _field(1, name) + _field(2, _field(2, json.dumps(value, sort_keys=True)))


def _schema(s):
    out = b""
    if s.get("description"):
        out += _field(4, s["description"])                      # Schema.description
    for k in sorted(s):
        if k.startswith("x-"):
            out += _field(31, _named_any(k, s[k]))               # Schema.vendor_extension
    return out


def _bool(num, v):
    return (_varint(num << 3) + _varint(1)) if v else b""


_VERBS = {"get": 2, "put": 3, "post": 4, "delete": 5, "patch": 8}       # PathItem fields


def _operation(op):
    out = b""
    for q in op["parameters"]:
        # ParametersItem.parameter -> Parameter.non_body_parameter -> NonBodyParameter
        # .query_parameter_sub_schema{in = 2, name = 4, type = 6, unique_items = 20}
        sub = _field(2, q["in"]) + _field(4, q["name"]) + _field(6, q["type"]) + _bool(20, q.get("uniqueItems"))
        out += _field(8, _field(1, _field(2, _field(3, sub))))     # Operation.parameters
    for k in sorted(op):
        if k.startswith("x-"):
            out += _field(13, _named_any(k, op[k]))              # Operation.vendor_extension
    return out


def encode(doc):
    """gnostic openapi.v2.Document for the subset document() produces."""
    out = _field(1, doc["swagger"])                              # Document.swagger
    info = doc["info"]
    out += _field(2, _field(1, info["title"]) + _field(2, info["version"]))   # Document.info
    items = b""
    for path, item in sorted(doc["paths"].items()):
        body = b"".join(_field(_VERBS[verb], _operation(op)) for verb, op in sorted(item.items()))
        items += _field(2, _field(1, path) + _field(2, body))    # Paths.path: NamedPathItem
    out += _field(8, items)                                      # Document.paths
    named = b"".join(_field(1, _field(1, name) + _field(2, _schema(s)))      # NamedSchema
                     for name, s in sorted(doc["definitions"].items()))
    out += _field(9, named)                                      # Document.definitions
    return out
