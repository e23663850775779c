"""A small block-style YAML emitter (the standard library has none) for the Hetzner metadata
documents and NoCloud files. Strings that a YAML 1.1 reader would take for another type are
single-quoted."""
import json
import re

_PLAIN = re.compile(r"^[A-Za-z0-9_./@+-][A-Za-z0-9_ ./@+:=-]*$")
_SPECIAL = re.compile(r"^(?:y|Y|yes|Yes|YES|n|N|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|"
                      r"off|Off|OFF|null|Null|NULL|~|[-+]?[0-9][0-9_]*|0x[0-9a-fA-F_]+|[0-9]+[eE][-+]?[0-9]+|"
                      r"[-+]?(?:[0-9][0-9_]*)?\.[0-9_]*(?:[eE][-+]?[0-9]+)?|"
                      r"[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$")


def scalar(v):
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, (int, float)):
        return repr(v)
    s = str(v)
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in s):
        # A JSON string is a valid YAML double-quoted scalar; it keeps newlines and tabs.
        return json.dumps(s)
    if s and _PLAIN.match(s) and not _SPECIAL.match(s) and ": " not in s and not s.endswith(":") \
            and not s.endswith(" ") and not s.startswith("- "):
        return s
    return "'" + s.replace("'", "''") + "'"


def _emit(v, indent, out):
    pad = " " * indent
    if isinstance(v, dict):
        if not v:
            out.append(pad + "{}")
        for k, item in v.items():
            key = scalar(k)
            if isinstance(item, (dict, list)) and item:
                out.append("%s%s:" % (pad, key))
                # Lists under a key are indented like the Hetzner document (and afterburn's
                # fixtures) write them.
                _emit(item, indent + 4 if isinstance(item, dict) else indent + 4, out)
            else:
                out.append("%s%s: %s" % (pad, key, _inline(item)))
    elif isinstance(v, list):
        for item in v:
            if isinstance(item, dict) and item:
                sub = []
                _emit(item, indent + 2, sub)
                sub[0] = pad + "- " + sub[0][indent + 2:]
                out.extend(sub)
            elif isinstance(item, list) and item:
                sub = []
                _emit(item, indent + 2, sub)
                sub[0] = pad + "- " + sub[0][indent + 2:]
                out.extend(sub)
            else:
                out.append(pad + "- " + _inline(item))
    else:
        out.append(pad + scalar(v))


def _inline(v):
    if isinstance(v, dict):
        return "{}"
    if isinstance(v, list):
        return "[]"
    return scalar(v)


def dump(v):
    out = []
    _emit(v, 0, out)
    return "\n".join(out) + "\n"
