"""Decoding of the Kubernetes protobuf encoding (application/vnd.kubernetes.protobuf), which
kubectl's typed clients use for request bodies of built-in kinds (`kubectl create deployment`,
`run`, `create job`, auth can-i, ...). The field tables come from k8s.io/api and
k8s.io/apimachinery (tests/data/k8s-proto-schema.json, written by gen-proto-schema), so every
built-in kind of the groups listed there decodes the way the real server's generated code does:
unknown field numbers are skipped, zero values of non-pointer `omitempty` fields do not appear
in the JSON, and the apimachinery types that have their own JSON form (Time, MicroTime,
Duration, Quantity, IntOrString, RawExtension, FieldsV1) get it. A body of a kind not in the
tables is None (answered 415).

Encoding (encode_object, encode_message) is the inverse, as the real server answers a client that
accepts application/vnd.kubernetes.protobuf: the generated Marshal code of gogo-protobuf writes
fields in ascending number, non-pointer scalars and structs always (zero values too), pointer
fields only when set, repeated scalars unpacked (proto2), map entries sorted by key; the object
goes into a runtime.Unknown after the 4-byte magic."""
import base64
import calendar
import datetime
import fractions
import json
import os
import re
import struct

MAGIC = b"k8s\x00"
SCHEMA_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "k8s-proto-schema.json")
META = "k8s.io.apimachinery.pkg.apis.meta.v1."
_schema = None
_inline = None


def schema():
    global _schema, _inline
    if _schema is None:
        with open(SCHEMA_PATH, encoding="utf-8") as f:
            doc = json.load(f)
        _inline = {(m, num) for m, nums in (doc.get("inline") or {}).items() for num in nums}
        _schema = doc["messages"]
    return _schema


def inline(name, num):
    """Whether field num of message name is an embedded struct whose members are inline in the
    JSON (`json:",inline"`: a Probe's ProbeHandler, a Volume's VolumeSource, ...)."""
    schema()
    return (name, num) in _inline


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
    if _list_wrapper(name):
        return decode_message(name, raw, special=False).get("items", [])
    if name in ("k8s.io.apimachinery.pkg.runtime.RawExtension", META + "FieldsV1"):
        data = b""
        for num, wt, v in fields(raw):
            if num == 1 and wt == 2:
                data = v
        return json.loads(data) if data else None
    return NotImplemented


def _list_wrapper(name):
    """ExtraValue, AttestationValue, meta.v1 Verbs: a Go []string whose message has one repeated
    string `items`; its JSON form is the plain list."""
    table = schema().get(name)
    return table is not None and len(table) == 1 and table[0][:4] == [1, "items", "string", True]


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
        if not repeated and inline(name, num):
            d = _value(typ, wt, v)
            if isinstance(d, dict):
                out.update(d)
        elif typ == "map":
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
    """"apps/v1" -> k8s.io.api.apps.v1; "v1" -> core; "rbac.authorization.k8s.io/v1" -> rbac;
    None for a group that is not one of k8s.io/api's (custom resources: "apps.example.com")."""
    group, _, version = api_version.rpartition("/")
    if not version:
        return None
    if not group:
        short = "core"
    elif group in ("apps", "batch", "autoscaling", "policy"):
        short = group
    elif group in ("rbac.authorization.k8s.io", "flowcontrol.apiserver.k8s.io"):
        short = group.split(".")[0]
    elif group.endswith(".k8s.io") and "." not in group[:-len(".k8s.io")]:
        short = group[:-len(".k8s.io")]
    else:
        return None
    return "k8s.io.api.%s.%s" % (short, version)


# The kinds of meta/v1 that every group version carries (AddToGroupVersion): Status answers,
# watch events and the options bodies of requests.
_META_KINDS = ("Status", "WatchEvent", "DeleteOptions", "CreateOptions", "UpdateOptions", "PatchOptions",
               "GetOptions", "ListOptions")


def message_name(api_version, kind):
    """The message of a kind (e.g. "v1", "Node" -> k8s.io.api.core.v1.Node; "v1", "NodeList" ->
    k8s.io.api.core.v1.NodeList; "v1", "Status" -> meta.v1 Status), or None when the tables have
    no such kind (custom resources)."""
    if not api_version or not kind:
        return None
    pkg = package_of(api_version)
    if pkg is None:
        return None
    if api_version == "meta.k8s.io/v1" or (kind in _META_KINDS and pkg + "." + kind not in schema()):
        name = META + kind
    else:
        name = pkg + "." + kind
    return name if name in schema() else None


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
    name = message_name(tm["apiVersion"], tm["kind"])
    if name is None:
        return None
    obj = {"apiVersion": tm["apiVersion"], "kind": tm["kind"]}
    obj.update(decode_message(name, raw))
    return obj


# --- encoding ---------------------------------------------------------------------------------

def _uvarint(v):
    v &= (1 << 64) - 1  # negative int32/int64 go out sign-extended to 10 bytes, as uint64(v) in Go
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def _key(num, wt):
    return _uvarint(num << 3 | wt)


def _len_field(key, data):
    return key + _uvarint(len(data)) + data


_RFC3339 = re.compile(r"^(\d{4})-(\d\d)-(\d\d)[Tt](\d\d):(\d\d):(\d\d)(?:\.(\d+))?(?:[Zz]|([+-])(\d\d):(\d\d))$")


def _parse_time(s):
    """RFC 3339 text -> (seconds since the epoch, nanoseconds)."""
    m = _RFC3339.match(s) if isinstance(s, str) else None
    if not m:
        raise ValueError("not an RFC 3339 time: %r" % (s,))
    secs = calendar.timegm(tuple(int(m.group(i)) for i in range(1, 7)))
    if m.group(8):
        off = (int(m.group(9)) * 60 + int(m.group(10))) * 60
        secs -= off if m.group(8) == "+" else -off
    return secs, int((m.group(7) or "0")[:9].ljust(9, "0"))


_DURATION_UNITS = {"ns": 1, "us": 10**3, "\u00b5s": 10**3, "\u03bcs": 10**3, "ms": 10**6, "s": 10**9,
                   "m": 60 * 10**9, "h": 3600 * 10**9}
_DURATION_PART = re.compile(r"(\d*\.?\d*)([a-z\u00b5\u03bc]+)")


def _parse_duration(s):
    """Go's time.ParseDuration: "1h2m3.5s", "300ms", "-1.5h", "0" -> nanoseconds."""
    if not isinstance(s, str):
        raise ValueError("not a duration: %r" % (s,))
    text = s
    sign = 1
    if text and text[0] in "+-":
        sign = -1 if text[0] == "-" else 1
        text = text[1:]
    if text == "0":
        return 0
    total = fractions.Fraction(0)
    pos = 0
    while pos < len(text):
        m = _DURATION_PART.match(text, pos)
        if not m or m.group(1) in ("", ".") or m.group(2) not in _DURATION_UNITS:
            raise ValueError("time: invalid duration %r" % s)
        total += fractions.Fraction(m.group(1)) * _DURATION_UNITS[m.group(2)]
        pos = m.end()
    if not text:
        raise ValueError("time: invalid duration %r" % s)
    return sign * int(total)


def _compact_json(v):
    return json.dumps(v, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _encode_special(name, value):
    """The bytes of an apimachinery type with its own marshalling, else NotImplemented. value is
    its JSON form (None for a zero value)."""
    if name in (META + "Time", META + "MicroTime"):
        if value in (None, ""):
            return b""  # a zero Time marshals to nothing (an empty message where it is a field)
        secs, nanos = _parse_time(value)
        # Time has second precision (its ProtoTime leaves nanos 0); MicroTime keeps microseconds.
        nanos = nanos // 1000 * 1000 if name.endswith("MicroTime") else 0
        return b"\x08" + _uvarint(secs) + b"\x10" + _uvarint(nanos)
    if name == META + "Duration":
        return b"\x08" + _uvarint(_parse_duration(value) if value is not None else 0)
    if name == "k8s.io.apimachinery.pkg.api.resource.Quantity":
        if value is None:
            value = "0"
        elif not isinstance(value, str):
            from .quantity import canonical
            value = canonical(value)
        return _len_field(b"\x0a", value.encode("utf-8"))
    if name == "k8s.io.apimachinery.pkg.util.intstr.IntOrString":
        if isinstance(value, str):  # type 1 (String), intVal 0, strVal
            return b"\x08\x01\x10\x00" + _len_field(b"\x1a", value.encode("utf-8"))
        return b"\x08\x00\x10" + _uvarint(_int(value or 0)) + b"\x1a\x00"
    if name in ("k8s.io.apimachinery.pkg.runtime.RawExtension", META + "FieldsV1"):
        return b"" if value is None else _len_field(b"\x0a", _compact_json(value))
    if _list_wrapper(name) and (value is None or isinstance(value, list)):
        return encode_message(name, {"items": value}, special=False)
    return NotImplemented


def _int(v):
    if isinstance(v, bool) or not isinstance(v, (int, float)) or (isinstance(v, float) and not v.is_integer()):
        raise ValueError("not an integer: %r" % (v,))
    return int(v)


def _encode_scalar(typ, num, v):
    """One scalar field (key and value); v None is the zero value."""
    if typ == "string":
        if v is None:
            v = ""
        if not isinstance(v, str):
            raise ValueError("not a string: %r" % (v,))
        return _len_field(_key(num, 2), v.encode("utf-8"))
    if typ == "bytes":
        return _len_field(_key(num, 2), base64.b64decode(v or ""))
    if typ == "bool":
        if v is not None and not isinstance(v, bool):
            raise ValueError("not a bool: %r" % (v,))
        return _key(num, 0) + (b"\x01" if v else b"\x00")
    if typ in ("int32", "int64", "uint32", "uint64"):
        return _key(num, 0) + _uvarint(_int(v or 0))
    if typ in ("sint32", "sint64"):
        n = _int(v or 0)
        return _key(num, 0) + _uvarint((n << 1) ^ (n >> 63))
    if typ == "double":
        return _key(num, 1) + struct.pack("<d", float(v or 0))
    if typ == "float":
        return _key(num, 5) + struct.pack("<f", float(v or 0))
    if typ == "fixed64":
        return _key(num, 1) + struct.pack("<Q", _int(v or 0))
    if typ == "fixed32":
        return _key(num, 5) + struct.pack("<I", _int(v or 0))
    raise ValueError("unknown scalar type %s" % typ)


_plans = {}


def _plan(name):
    """The fields of a message in ascending number, as generated Marshal code writes them."""
    p = _plans.get(name)
    if p is None:
        table = schema().get(name)
        if table is None:
            raise ValueError("no field table for %s" % name)
        p = _plans[name] = sorted(table, key=lambda f: f[0])
    return p


def _encode_value(typ, num, v):
    """One non-repeated field of a message or scalar type, always written."""
    if "." in typ:
        return _len_field(_key(num, 2), encode_message(typ, v))
    return _encode_scalar(typ, num, v)


def encode_message(name, value, special=True):
    """One message of the named type from its JSON-like value (the inverse of decode_message).
    A member without a field in the table is dropped, as Go's typed decode drops it."""
    if special:
        b = _encode_special(name, value)
        if b is not NotImplemented:
            return b
    if value is None:
        value = {}
    if not isinstance(value, dict):
        raise ValueError("%s: not an object: %r" % (name, value))
    out = []
    for num, jname, typ, repeated, mapv, ptr, _ in _plan(name):
        v = value if not repeated and inline(name, num) else value.get(jname)
        if ptr and v is None:
            continue  # a nil pointer is not written
        if typ == "map":
            if v is None:
                continue
            if not isinstance(v, dict):
                raise ValueError("%s.%s: not a map: %r" % (name, jname, v))
            key = _key(num, 2)
            for k in sorted(v):
                entry = _encode_scalar("string", 1, k)
                mv = v[k]
                if mapv == "bytes":
                    if mv is not None:  # a nil []byte value is not written
                        entry += _encode_scalar("bytes", 2, mv)
                else:
                    entry += _encode_value(mapv, 2, mv)
                out.append(_len_field(key, entry))
        elif repeated:
            if v is None:
                continue
            if not isinstance(v, list):
                raise ValueError("%s.%s: not a list: %r" % (name, jname, v))
            for item in v:
                out.append(_encode_value(typ, num, item))
        elif typ == "bytes":
            if v is not None:  # a nil []byte is not written
                out.append(_encode_scalar("bytes", num, v))
        else:
            out.append(_encode_value(typ, num, v))
    return b"".join(out)


def envelope(api_version, kind, raw):
    """The magic and the runtime.Unknown around an object's message bytes."""
    tm = _encode_scalar("string", 1, api_version) + _encode_scalar("string", 2, kind)
    return MAGIC + _len_field(b"\x0a", tm) + _len_field(b"\x12", raw) + b"\x1a\x00\x22\x00"


def encode_object(obj):
    """An object (or list) as the real server answers it in application/vnd.kubernetes.protobuf,
    or None when its kind is not in the tables (custom resources answer JSON)."""
    if not isinstance(obj, dict):
        return None
    av, kind = obj.get("apiVersion") or "", obj.get("kind") or ""
    name = message_name(av, kind)
    if name is None:
        return None
    return envelope(av, kind, encode_message(name, obj))


def watch_frame(event_type, obj):
    """One event of a protobuf watch stream: a 4-byte big-endian length and a meta.v1 WatchEvent
    (without magic or Unknown) whose object is a RawExtension holding encode_object(obj)."""
    raw = encode_object(obj)
    if raw is None:
        raise ValueError("no field table for %s %s" % (obj.get("apiVersion"), obj.get("kind")))
    ev = _encode_scalar("string", 1, event_type) + _len_field(b"\x12", _len_field(b"\x0a", raw))
    return struct.pack(">I", len(ev)) + ev


def read_frames(data):
    """Splits a protobuf watch stream into its WatchEvent messages (for tests)."""
    out = []
    i = 0
    while i + 4 <= len(data):
        n = struct.unpack(">I", data[i:i + 4])[0]
        if i + 4 + n > len(data):
            raise ValueError("truncated frame")
        out.append(data[i + 4:i + 4 + n])
        i += 4 + n
    if i != len(data):
        raise ValueError("truncated frame header")
    return out


def decode_event(msg):
    """A WatchEvent message -> (type, object as decode() gives it)."""
    etype, obj = "", None
    for num, wt, v in fields(msg):
        if num == 1 and wt == 2:
            etype = v.decode("utf-8")
        elif num == 2 and wt == 2:
            for n2, wt2, v2 in fields(v):
                if n2 == 1 and wt2 == 2:
                    obj = decode(v2)
    return etype, obj
