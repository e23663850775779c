"""Label and field selectors with the grammar and error wording of k8s.io/apimachinery."""
import re

from .errors import bad_request

_VALUE_RE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_NAME_RE = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS1123_SUB = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def qualified_name_errors(key):
    """validation.IsQualifiedName: returns a list of message strings (empty when valid)."""
    errs = []
    parts = key.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            if len(prefix) > 253:
                errs.append("prefix part must be no more than 253 characters")
            if not _DNS1123_SUB.match(prefix):
                errs.append("prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                            "characters, '-' or '.', and must start and end with an alphanumeric character "
                            "(e.g. 'example.com', regex used for validation is "
                            "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
    else:
        return ["a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start "
                "and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex "
                "used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS "
                "subdomain prefix and '/' (e.g. 'example.com/MyName')"]
    if not name:
        errs.append("name part must be non-empty")
    elif len(name) > 63:
        errs.append("name part must be no more than 63 characters")
    if name and not _NAME_RE.match(name):
        errs.append("name part must consist of alphanumeric characters, '-', '_' or '.', and must start and "
                    "end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex "
                    "used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")
    return errs


def label_value_errors(v):
    errs = []
    if len(v) > 63:
        errs.append("must be no more than 63 characters")
    if not _VALUE_RE.match(v):
        errs.append("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' "
                    "or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or "
                    "'my_value',  or '12345', regex used for validation is "
                    "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')")
    return errs


class Requirement:
    def __init__(self, key, op, values):
        self.key, self.op, self.values = key, op, values

    def matches(self, labels):
        has = self.key in labels
        v = labels.get(self.key)
        if self.op in ("=", "==", "in"):
            return has and v in self.values
        if self.op in ("!=", "notin"):
            return not has or v not in self.values
        if self.op == "exists":
            return has
        if self.op == "!":
            return not has
        if self.op in ("gt", "lt"):
            if not has:
                return False
            try:
                lv = int(v)
            except ValueError:
                return False
            return lv > self.values[0] if self.op == "gt" else lv < self.values[0]
        return False


_TOKEN_RE = re.compile(r"\s*(\(|\)|,|==|=|!=|!|>|<|[^\s(),=!<>]+)")


def parse_label_selector(s):
    """Returns a list of Requirements (ANDed); raises 400 like the real parser."""
    s = s or ""
    toks = []
    pos = 0
    while pos < len(s):
        m = _TOKEN_RE.match(s, pos)
        if not m:
            if s[pos:].strip() == "":
                break
            raise bad_request("unable to parse requirement: found '%s', expected: identifier" % s[pos])
        toks.append(m.group(1))
        pos = m.end()
    reqs = []
    i = 0

    def err(msg):
        return bad_request("unable to parse requirement: %s" % msg)

    while i < len(toks):
        neg = False
        if toks[i] == "!":
            neg = True
            i += 1
        if i >= len(toks) or toks[i] in ("(", ")", ",", "=", "==", "!=", "!", ">", "<"):
            raise err("found '%s', expected: identifier" % (toks[i] if i < len(toks) else ""))
        key = toks[i]
        i += 1
        kerr = qualified_name_errors(key)
        if kerr:
            raise err('invalid label key "%s": %s' % (key, "; ".join(kerr)))
        if neg:
            reqs.append(Requirement(key, "!", []))
        elif i >= len(toks) or toks[i] == ",":
            reqs.append(Requirement(key, "exists", []))
        else:
            op = toks[i]
            i += 1
            if op in ("=", "==", "!="):
                val = ""
                if i < len(toks) and toks[i] not in (",", "(", ")"):
                    val = toks[i]
                    i += 1
                verr = label_value_errors(val)
                if verr:
                    raise err('invalid label value: "%s": at key: "%s": %s' % (val, key, "; ".join(verr)))
                reqs.append(Requirement(key, op, [val]))
            elif op in ("in", "notin"):
                if i >= len(toks) or toks[i] != "(":
                    raise err("found '%s', expected: '('" % (toks[i] if i < len(toks) else ""))
                i += 1
                vals = []
                while i < len(toks) and toks[i] != ")":
                    if toks[i] == ",":
                        i += 1
                        continue
                    vals.append(toks[i])
                    i += 1
                if i >= len(toks):
                    raise err("found '', expected: ')'")
                i += 1
                for v in vals:
                    verr = label_value_errors(v)
                    if verr:
                        raise err('invalid label value: "%s": at key: "%s": %s' % (v, key, "; ".join(verr)))
                reqs.append(Requirement(key, op, vals))
            elif op in (">", "<"):
                if i >= len(toks):
                    raise err("found '', expected: integer")
                try:
                    n = int(toks[i])
                except ValueError:
                    raise err("for 'Gt', 'Lt' operators, the value must be an integer")
                i += 1
                reqs.append(Requirement(key, "gt" if op == ">" else "lt", [n]))
            else:
                raise err("found '%s', expected: in, notin, =, ==, !=, gt, lt" % op)
        if i < len(toks):
            if toks[i] != ",":
                raise err("found '%s', expected: ',' or 'end of string'" % toks[i])
            i += 1
    return reqs


def labels_match(reqs, obj):
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return all(r.matches(labels) for r in reqs)


def parse_field_selector(s):
    """Returns [(field, op, value)]; op is '=' or '!='. Backslash escapes as in fields.ParseSelector."""
    out = []
    if not s:
        return out
    for term in _split_unescaped(s, ","):
        if not term:
            continue
        for op in ("!=", "==", "="):
            idx = _find_unescaped(term, op)
            if idx >= 0:
                f = term[:idx]
                v = _unescape(term[idx + len(op):])
                out.append((f, "!=" if op == "!=" else "=", v))
                break
        else:
            raise bad_request("invalid selector: '%s'; can't understand '%s'" % (s, term))
    return out


def _find_unescaped(s, sub):
    i = 0
    while i < len(s):
        if s[i] == "\\":
            i += 2
            continue
        if s.startswith(sub, i):
            return i
        i += 1
    return -1


def _split_unescaped(s, sep):
    parts, cur, i = [], "", 0
    while i < len(s):
        if s[i] == "\\" and i + 1 < len(s):
            cur += s[i:i + 2]
            i += 2
            continue
        if s[i] == sep:
            parts.append(cur)
            cur = ""
        else:
            cur += s[i]
        i += 1
    parts.append(cur)
    return parts


def _unescape(v):
    out, i = "", 0
    while i < len(v):
        if v[i] == "\\" and i + 1 < len(v):
            out += v[i + 1]
            i += 2
        else:
            out += v[i]
            i += 1
    return out


def get_path(obj, dotted):
    cur = obj
    for p in dotted.split("."):
        if not isinstance(cur, dict):
            return None
        cur = cur.get(p)
    return cur


def field_value(obj, field):
    v = get_path(obj, field)
    if v is None:
        # The real field sets render absent strings as "" and absent bools as "false".
        return "false" if field in ("spec.unschedulable",) else ""
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def fields_match(terms, obj):
    for f, op, v in terms:
        got = field_value(obj, f)
        if (got == v) != (op == "="):
            return False
    return True
