"""Decoding of the Kubernetes protobuf encoding for the request bodies kubectl's typed clients
send as protobuf: auth can-i / whoami reviews and `kubectl create namespace|configmap|secret|
serviceaccount` and `kubectl create token` (TokenRequest). The real server accepts protobuf for
every built-in type; here anything else is answered 415 (clients that speak JSON, like
cloudnode's, are unaffected)."""
import base64

MAGIC = b"k8s\x00"


def _varint(b, i):
    shift = 0
    out = 0
    while True:
        c = b[i]
        i += 1
        out |= (c & 0x7F) << shift
        if not c & 0x80:
            return out, i
        shift += 7


def fields(b):
    """Yields (field number, wire type, value) for one message; value is bytes for type 2."""
    i = 0
    while i < len(b):
        key, i = _varint(b, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = _varint(b, i)
        elif wt == 2:
            n, i = _varint(b, i)
            v = b[i:i + n]
            i += n
        elif wt == 1:
            v = b[i:i + 8]
            i += 8
        elif wt == 5:
            v = b[i:i + 4]
            i += 4
        else:
            raise ValueError("unsupported wire type %d" % wt)
        yield num, wt, v


def _msg(b, spec):
    """spec: {field number: (name, kind)} with kind "str", "strs" or a nested spec dict."""
    out = {}
    for num, wt, v in fields(b):
        if num not in spec:
            continue
        name, kind = spec[num]
        if kind == "bool":
            out[name] = bool(v)
            continue
        if kind == "int":
            out[name] = v if wt == 0 else None
            continue
        if wt != 2:
            continue
        if kind in ("map", "bmap"):
            e = _msg(v, {1: ("k", "str"), 2: ("v", "str" if kind == "map" else "bytes")})
            out.setdefault(name, {})[e.get("k", "")] = e.get("v", "")
        elif kind == "bytes":
            out[name] = base64.b64encode(v).decode()
        elif kind == "str":
            out[name] = v.decode()
        elif kind == "strs":
            out.setdefault(name, []).append(v.decode())
        else:
            out[name] = _msg(v, kind)
    return out


_META = {1: ("name", "str"), 2: ("generateName", "str"), 3: ("namespace", "str"), 11: ("labels", "map"),
         12: ("annotations", "map"), 14: ("finalizers", "strs")}
_RA = {1: ("namespace", "str"), 2: ("verb", "str"), 3: ("group", "str"), 4: ("version", "str"),
       5: ("resource", "str"), 6: ("subresource", "str"), 7: ("name", "str")}
_NRA = {1: ("path", "str"), 2: ("verb", "str")}
_SAR_SPEC = {1: ("resourceAttributes", _RA), 2: ("nonResourceAttributes", _NRA), 3: ("user", "str"),
             4: ("groups", "strs"), 6: ("uid", "str")}
TYPES = {
    ("authorization.k8s.io/v1", "SelfSubjectAccessReview"): {1: ("metadata", _META), 2: ("spec", _SAR_SPEC)},
    ("authorization.k8s.io/v1", "SubjectAccessReview"): {1: ("metadata", _META), 2: ("spec", _SAR_SPEC)},
    ("authorization.k8s.io/v1", "SelfSubjectRulesReview"): {1: ("metadata", _META),
                                                            2: ("spec", {1: ("namespace", "str")})},
    ("authentication.k8s.io/v1", "SelfSubjectReview"): {1: ("metadata", _META)},
    ("v1", "Namespace"): {1: ("metadata", _META), 2: ("spec", {1: ("finalizers", "strs")})},
    ("v1", "ConfigMap"): {1: ("metadata", _META), 2: ("data", "map"), 3: ("binaryData", "bmap"),
                          4: ("immutable", "bool")},
    ("v1", "Secret"): {1: ("metadata", _META), 2: ("data", "bmap"), 3: ("type", "str"), 4: ("stringData", "map"),
                       5: ("immutable", "bool")},
    ("v1", "ServiceAccount"): {1: ("metadata", _META), 4: ("automountServiceAccountToken", "bool")},
    ("authentication.k8s.io/v1", "TokenRequest"): {1: ("metadata", _META), 2: ("spec", {
        1: ("audiences", "strs"), 4: ("expirationSeconds", "int"),
        3: ("boundObjectRef", {1: ("kind", "str"), 2: ("apiVersion", "str"), 3: ("name", "str"), 4: ("uid", "str")})})},
}


def decode(body):
    """Returns the object as a JSON-like dict, or None when the type is not understood."""
    if not body.startswith(MAGIC):
        return None
    env = _msg(body[len(MAGIC):], {1: ("typeMeta", {1: ("apiVersion", "str"), 2: ("kind", "str")})})
    raw = None
    for num, wt, v in fields(body[len(MAGIC):]):
        if num == 2 and wt == 2:
            raw = v
    tm = env.get("typeMeta") or {}
    spec = TYPES.get((tm.get("apiVersion"), tm.get("kind")))
    if spec is None or raw is None:
        return None
    obj = {"apiVersion": tm["apiVersion"], "kind": tm["kind"]}
    obj.update(_msg(raw, spec))
    return obj
