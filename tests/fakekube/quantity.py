"""resource.Quantity as the real server decodes and re-encodes it: a controller that writes
"cpu: 0.5" reads back "500m" (and "1024Mi" becomes "1Gi"), so drift detection that compares
strings is caught here as it would be on a real cluster."""
import decimal
import re

QUANTITY_ERROR = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
_RE = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))((?:[KMGTPE]i)|[numkMGTPE]|[eE][+-]?\d+)?$")
_DEC = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BIN = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DEC_SUFFIX = {v: k for k, v in _DEC.items()}
_BIN_SUFFIX = {v: k for k, v in _BIN.items()}


def canonical(s):
    """Returns the canonical string of a quantity, or raises ValueError."""
    if isinstance(s, bool) or not isinstance(s, (str, int, float)):
        raise ValueError(QUANTITY_ERROR)
    m = _RE.match(str(s).strip()) if isinstance(s, str) else _RE.match(repr(s))
    if not m:
        raise ValueError(QUANTITY_ERROR)
    num = decimal.Decimal(m.group(1))
    suf = m.group(2) or ""
    ctx = decimal.Context(prec=80)
    if suf in _BIN:
        fmt, val = "bin", ctx.multiply(num, decimal.Decimal(1024) ** _BIN[suf])
    elif suf in _DEC:
        fmt, val = "dec", ctx.multiply(num, decimal.Decimal(10) ** _DEC[suf])
    else:
        fmt, val = "exp", ctx.multiply(num, decimal.Decimal(10) ** int(suf[1:]))
    # Precision below nano units is rounded up, as Quantity does.
    nano = (val * decimal.Decimal(10) ** 9).to_integral_value(rounding=decimal.ROUND_CEILING)
    val = nano / decimal.Decimal(10) ** 9
    if fmt == "bin":
        if -1024 < val < 1024 or val != val.to_integral_value():
            fmt = "dec"
        else:
            iv = int(val)
            k = 0
            while k < 6 and iv % 1024 == 0 and iv != 0:
                iv //= 1024
                k += 1
            return "%d%s" % (iv, _BIN_SUFFIX.get(k, ""))
    n = int(nano)
    if n == 0:
        return "0"
    e = -9
    while n % 1000 == 0 and e < 18:
        n //= 1000
        e += 3
    if fmt == "exp":
        return "%d%s" % (n, "" if e == 0 else "e%d" % e)
    return "%d%s" % (n, _DEC_SUFFIX[e])


def normalize_resources(obj):
    """Canonicalizes the quantities of containers' resources (pods and pod templates) and of a
    Node's capacity/allocatable. Returns an error message or None."""
    maps = []

    def containers(spec):
        if not isinstance(spec, dict):
            return
        for key in ("containers", "initContainers", "ephemeralContainers"):
            for c in spec.get(key) or []:
                r = c.get("resources") if isinstance(c, dict) else None
                if isinstance(r, dict):
                    maps.extend(r.get(x) for x in ("limits", "requests"))
        ov = spec.get("overhead")
        maps.append(ov)
    spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
    containers(spec)
    containers((spec.get("template") or {}).get("spec") if isinstance(spec.get("template"), dict) else None)
    st = obj.get("status") if isinstance(obj.get("status"), dict) else {}
    maps.extend([st.get("capacity"), st.get("allocatable")])
    for mp in maps:
        if not isinstance(mp, dict):
            continue
        for k, v in list(mp.items()):
            try:
                mp[k] = canonical(v)
            except ValueError as e:
                return str(e)
    return None
