"""Custom resources against their CRD's structural openAPIV3Schema: pruning of unknown fields
(the real server silently drops them, which a fake must do too or lost fields go unnoticed),
type, required and enum checks worded like the real server's."""
from .errors import FieldError

_TYPES = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
}


def schema_for(rt, version=None):
    crd = rt.crd or {}
    for v in (crd.get("spec") or {}).get("versions") or []:
        if v.get("name") == (version or rt.version):
            return ((v.get("schema") or {}).get("openAPIV3Schema")) or {}
    return {}


def prune(obj, schema, dropped=None):
    """Drops fields the schema does not declare; root metadata is ObjectMeta and kept. The
    dotted paths of dropped fields are appended to dropped (for fieldValidation)."""
    if not isinstance(schema, dict) or not schema:
        return obj
    return _prune(obj, schema, True, "", dropped if dropped is not None else [])


def _prune(v, s, root, path, dropped):
    if not isinstance(s, dict):
        return v
    if isinstance(v, dict):
        props = s.get("properties")
        addl = s.get("additionalProperties")
        preserve = s.get("x-kubernetes-preserve-unknown-fields")
        out = {}
        for k, x in v.items():
            p = path + "." + k if path else k
            sub = props.get(k) if props is not None else None
            if x is None and not (isinstance(sub, dict) and sub.get("nullable")) and not preserve:
                continue  # nulls are pruned unless the schema says nullable
            if root and k in ("apiVersion", "kind", "metadata"):
                out[k] = x
            elif props is not None and k in props:
                out[k] = _prune(x, props[k], False, p, dropped)
            elif isinstance(addl, dict):
                out[k] = _prune(x, addl, False, p, dropped)
            elif addl is True or preserve or (props is None and addl is None and s.get("type") != "object"):
                out[k] = x
            else:
                dropped.append(p)
        return out
    if isinstance(v, list) and isinstance(s.get("items"), dict):
        return [_prune(x, s["items"], False, "%s[%d]" % (path, i), dropped) for i, x in enumerate(v)]
    return v


def _type_name(v):
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    if isinstance(v, dict):
        return "object"
    return "null"


def _check(v, s, path, errs):
    if not isinstance(s, dict):
        return
    if v is None:
        if not s.get("nullable"):
            t = s.get("type")
            if t:
                errs.append(FieldError(path, "Invalid value", "null", "%s in body must be of type %s: \"null\""
                                       % (path, t)))
        return
    t = s.get("type")
    if s.get("x-kubernetes-int-or-string"):
        if not isinstance(v, (int, str)) or isinstance(v, bool):
            errs.append(FieldError(path, "Invalid value", _type_name(v),
                                   "%s in body must be of type integer,string: \"%s\"" % (path, _type_name(v))))
        return
    if t and t in _TYPES and not _TYPES[t](v):
        errs.append(FieldError(path, "Invalid value", _type_name(v),
                               "%s in body must be of type %s: \"%s\"" % (path, t, _type_name(v))))
        return
    if "enum" in s and v not in s["enum"]:
        errs.append(FieldError(path, "Unsupported value", v,
                               "supported values: " + ", ".join(_q(e) for e in s["enum"])))
    if isinstance(v, dict):
        for r in s.get("required") or []:
            if r not in v:
                errs.append(FieldError(path + "." + r if path else r, "Required value"))
        props = s.get("properties") or {}
        for k, x in v.items():
            sub = props.get(k)
            if sub is None and isinstance(s.get("additionalProperties"), dict):
                sub = s["additionalProperties"]
            if sub is not None:
                _check(x, sub, path + "." + k if path else k, errs)
    elif isinstance(v, list) and isinstance(s.get("items"), dict):
        for i, x in enumerate(v):
            _check(x, s["items"], "%s[%d]" % (path, i), errs)
    if isinstance(v, str):
        if "maxLength" in s and len(v) > s["maxLength"]:
            errs.append(FieldError(path, "Too long", detail="may not be more than %d bytes" % s["maxLength"]))
        if "minLength" in s and len(v) < s["minLength"]:
            errs.append(FieldError(path, "Invalid value", v, "%s in body should be at least %d chars long"
                                   % (path, s["minLength"])))
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        if "minimum" in s and v < s["minimum"]:
            errs.append(FieldError(path, "Invalid value", v, "%s in body should be greater than or equal to %s"
                                   % (path, s["minimum"])))
        if "maximum" in s and v > s["maximum"]:
            errs.append(FieldError(path, "Invalid value", v, "%s in body should be less than or equal to %s"
                                   % (path, s["maximum"])))


def _q(e):
    import json
    return json.dumps(e)


def validate_cr(rt, obj):
    s = schema_for(rt)
    errs = []
    if not s:
        return errs
    body = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "metadata")}
    s2 = dict(s)
    s2["properties"] = {k: v for k, v in (s.get("properties") or {}).items()
                        if k not in ("apiVersion", "kind", "metadata")}
    s2["required"] = [r for r in s.get("required") or [] if r not in ("apiVersion", "kind", "metadata")]
    _check(body, s2, "", errs)
    return errs
