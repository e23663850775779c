"""Decoding of the Kubernetes protobuf encoding (application/vnd.kubernetes.protobuf), which
kubectl's typed clients use for request bodies of built-in kinds (`kubectl create deployment`,
`run`, `create job`, auth can-i, ...). The field tables come from k8s.io/api and
k8s.io/apimachinery (tests/data/k8s-proto-schema.json, written by gen-proto-schema), so every
built-in kind of the groups listed there decodes the way the real server's generated code does:
unknown field numbers are skipped, zero values of non-pointer `omitempty` fields do not appear
in the JSON, and the apimachinery types that have their own JSON form (Time, MicroTime,
Duration, Quantity, IntOrString, RawExtension, FieldsV1) get it. A body of a kind not in the
tables is None (answered 415)."""
import base64
import datetime
import json
import os
import struct

MAGIC = b"k8s\x00"
SCHEMA_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "k8s-proto-schema.json")
META = "k8s.io.apimachinery.pkg.apis.meta.v1."
_schema = None


def schema():
    global _schema
    if _schema is None:
        with open(SCHEMA_PATH, encoding="utf-8") as f:
            _schema = json.load(f)["messages"]
    return _schema


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
            if i + n > len(b):
                raise ValueError("truncated field %d" % num)
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


def _signed(v, bits):
    v &= (1 << 64) - 1
    if v >= 1 << 63:
        v -= 1 << 64
    if bits == 32:
        v = ((v + (1 << 31)) % (1 << 32)) - (1 << 31)
    return v


def _scalar(typ, wt, v):
    if typ == "string":
        return v.decode("utf-8")
    if typ == "bytes":
        return base64.b64encode(v).decode()
    if typ == "bool":
        return bool(v)
    if typ in ("int32", "int64"):
        return _signed(v, 32 if typ == "int32" else 64)
    if typ in ("uint32", "uint64"):
        return v
    if typ in ("sint32", "sint64"):
        return (v >> 1) ^ -(v & 1)
    if typ == "double":
        return struct.unpack("<d", v)[0]
    if typ == "float":
        return struct.unpack("<f", v)[0]
    if typ in ("fixed32", "fixed64"):
        return int.from_bytes(v, "little")
    raise ValueError("unknown scalar type %s" % typ)


def _packed(typ, v):
    """A packed repeated scalar (wire type 2)."""
    out = []
    i = 0
    while i < len(v):
        if typ in ("double", "fixed64"):
            out.append(_scalar(typ, 1, v[i:i + 8]))
            i += 8
        elif typ in ("float", "fixed32"):
            out.append(_scalar(typ, 5, v[i:i + 4]))
            i += 4
        else:
            n, i = _varint(v, i)
            out.append(_scalar(typ, 0, n))
    return out


def _go_duration(ns):
    """Go's time.Duration.String()."""
    if ns == 0:
        return "0s"
    sign = "-" if ns < 0 else ""
    ns = abs(ns)
    if ns < 1000:
        return "%s%dns" % (sign, ns)
    if ns < 1000000:
        return "%s%sµs" % (sign, ("%.3f" % (ns / 1e3)).rstrip("0").rstrip("."))
    if ns < 1000000000:
        return "%s%sms" % (sign, ("%.6f" % (ns / 1e6)).rstrip("0").rstrip("."))
    h, rest = divmod(ns, 3600 * 10**9)
    m, rest = divmod(rest, 60 * 10**9)
    sec = ("%.9f" % (rest / 1e9)).rstrip("0").rstrip(".")
    out = ("%dh" % h if h else "") + ("%dm" % m if h or m else "") + sec + "s"
    return sign + out


def _special(name, raw):
    """The JSON form of an apimachinery type with its own marshalling, else NotImplemented."""
    if name in (META + "Time", META + "MicroTime"):
        d = decode_message(name, raw, special=False)
        secs, nanos = d.get("seconds", 0), d.get("nanos", 0)
        if not secs and not nanos:
            return None
        t = datetime.datetime.fromtimestamp(secs, datetime.timezone.utc)
        if name.endswith("MicroTime"):
            return t.strftime("%Y-%m-%dT%H:%M:%S") + ".%06dZ" % (nanos // 1000)
        return t.strftime("%Y-%m-%dT%H:%M:%SZ")
    if name == META + "Duration":
        return _go_duration(decode_message(name, raw, special=False).get("duration", 0))
    if name == "k8s.io.apimachinery.pkg.api.resource.Quantity":
        return decode_message(name, raw, special=False).get("string", "")
    if name == "k8s.io.apimachinery.pkg.util.intstr.IntOrString":
        d = decode_message(name, raw, special=False)
        return d.get("strVal", "") if d.get("type") == 1 else d.get("intVal", 0)
    if name in ("k8s.io.apimachinery.pkg.runtime.RawExtension", META + "FieldsV1"):
        data = b""
        for num, wt, v in fields(raw):
            if num == 1 and wt == 2:
                data = v
        return json.loads(data) if data else None
    return NotImplemented


def _zero(v):
    if isinstance(v, bool):
        return not v
    if isinstance(v, (int, float)):
        return v == 0
    return v in ("", [], {})


def decode_message(name, raw, special=True):
    """One message of the named type as a JSON-like value."""
    if special:
        s = _special(name, raw)
        if s is not NotImplemented:
            return s
    table = schema().get(name)
    if table is None:
        raise ValueError("no field table for %s" % name)
    by_num = {f[0]: f for f in table}
    out = {}
    for num, wt, v in fields(raw):
        f = by_num.get(num)
        if f is None:
            continue  # as generated code does: unknown fields are skipped
        _, jname, typ, repeated, mapv, _, _ = f
        if typ == "map":
            if wt != 2:
                raise ValueError("map entry of %s.%s is not length-delimited" % (name, jname))
            k, val = "", None
            for n2, wt2, v2 in fields(v):
                if n2 == 1:
                    k = v2.decode("utf-8")
                elif n2 == 2:
                    val = _value(mapv, wt2, v2)
            if val is None:
                val = "" if mapv == "string" else ({} if mapv not in ("bytes",) and "." in mapv else "")
            out.setdefault(jname, {})[k] = val
        elif repeated:
            if wt == 2 and "." not in typ and typ not in ("string", "bytes"):
                out.setdefault(jname, []).extend(_packed(typ, v))
            else:
                out.setdefault(jname, []).append(_value(typ, wt, v))
        else:
            out[jname] = _value(typ, wt, v)
    # Go's encoding/json: omitempty leaves out zero scalars, empty strings, lists and maps of
    # non-pointer fields; a pointer field set to zero stays.
    for _, jname, typ, repeated, _, ptr, omitempty in table:
        if jname in out and omitempty and not ptr and _zero(out[jname]) and ("." not in typ or repeated or typ == "map"):
            del out[jname]
    return out


def _value(typ, wt, v):
    if "." in typ:
        if wt != 2:
            raise ValueError("message field of type %s is not length-delimited" % typ)
        return decode_message(typ, v)
    return _scalar(typ, wt, v)


def package_of(api_version):
    """"apps/v1" -> k8s.io.api.apps.v1; "v1" -> core; "rbac.authorization.k8s.io/v1" -> rbac."""
    group, _, version = api_version.rpartition("/")
    return "k8s.io.api.%s.%s" % (group.split(".")[0] if group else "core", version)


def decode(body):
    """Returns the object as a JSON-like dict, or None when the type is not understood."""
    if not body.startswith(MAGIC):
        return None
    raw = None
    tm = {}
    for num, wt, v in fields(body[len(MAGIC):]):
        if num == 1 and wt == 2:
            for n2, _, v2 in fields(v):
                if n2 in (1, 2):
                    tm["apiVersion" if n2 == 1 else "kind"] = v2.decode("utf-8")
        elif num == 2 and wt == 2:
            raw = v
    if raw is None or not tm.get("apiVersion") or not tm.get("kind"):
        return None
    name = package_of(tm["apiVersion"]) + "." + tm["kind"]
    if name not in schema():
        return None
    obj = {"apiVersion": tm["apiVersion"], "kind": tm["kind"]}
    obj.update(decode_message(name, raw))
    return obj
