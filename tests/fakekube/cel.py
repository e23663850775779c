"""A subset of the Common Expression Language, enough for ValidatingAdmissionPolicies:
literals, field selection and indexing (an absent field is the error "no such key", as for the
typed objects of the real server), has(), the operators, ?:, in, the macros all/exists/
exists_one/map/filter and the usual string/list functions. Errors propagate like CEL errors
(&& and || absorb an error when the other side decides)."""
import re

from .schema import _type_name as json_type_name


class CelError(Exception):
    pass


_TOK = re.compile(r"""\s*(?:
    (?P<num>\d+\.\d+|\d+u?)|
    (?P<str>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")|
    (?P<id>[A-Za-z_][A-Za-z0-9_]*)|
    (?P<op>==|!=|<=|>=|&&|\|\||[-+*/%<>!?:.,\[\](){}])
)""", re.X)


def tokenize(s):
    out = []
    i = 0
    s = s.strip()
    while i < len(s):
        m = _TOK.match(s, i)
        if not m or m.end() == i:
            if s[i:].strip() == "":
                break
            raise CelError("Syntax error: token recognition error at: '%s'" % s[i])
        i = m.end()
        for k in ("num", "str", "id", "op"):
            if m.group(k) is not None:
                out.append((k, m.group(k)))
                break
    out.append(("eof", ""))
    return out


def _unquote(s):
    body = s[1:-1]
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t", "\\": "\\", "'": "'", '"': '"'}.get(m.group(1),
                                                                                           m.group(1)), body)


class Parser:
    def __init__(self, text):
        self.t = tokenize(text)
        self.i = 0

    def peek(self):
        return self.t[self.i]

    def take(self, val=None):
        tok = self.t[self.i]
        if val is not None and tok[1] != val:
            raise CelError("Syntax error: expected '%s' got '%s'" % (val, tok[1]))
        self.i += 1
        return tok

    def parse(self):
        e = self.ternary()
        if self.peek()[0] != "eof":
            raise CelError("Syntax error: unexpected '%s'" % self.peek()[1])
        return e

    def ternary(self):
        c = self.binary(0)
        if self.peek()[1] == "?":
            self.take()
            a = self.ternary()
            self.take(":")
            b = self.ternary()
            return ("?:", c, a, b)
        return c

    LEVELS = [("||",), ("&&",), ("==", "!=", "<", "<=", ">", ">=", "in"), ("+", "-"), ("*", "/", "%")]

    def binary(self, lvl):
        if lvl == len(self.LEVELS):
            return self.unary()
        left = self.binary(lvl + 1)
        while self.peek()[1] in self.LEVELS[lvl] and self.peek()[0] in ("op", "id"):
            op = self.take()[1]
            right = self.binary(lvl + 1)
            left = (op, left, right)
        return left

    def unary(self):
        if self.peek()[1] == "!":
            self.take()
            return ("!", self.unary())
        if self.peek()[1] == "-":
            self.take()
            return ("neg", self.unary())
        return self.postfix(self.primary())

    def args(self):
        self.take("(")
        out = []
        if self.peek()[1] != ")":
            out.append(self.ternary())
            while self.peek()[1] == ",":
                self.take()
                out.append(self.ternary())
        self.take(")")
        return out

    def postfix(self, e):
        while True:
            p = self.peek()[1]
            if p == ".":
                self.take()
                kind, name = self.take()
                if kind != "id":
                    raise CelError("Syntax error: mismatched input '%s' expecting IDENTIFIER" % name)
                if self.peek()[1] == "(":
                    e = ("method", e, name, self.args())
                else:
                    e = ("field", e, name)
            elif p == "[":
                self.take()
                idx = self.ternary()
                self.take("]")
                e = ("index", e, idx)
            else:
                return e

    def primary(self):
        kind, v = self.take()
        if kind == "num":
            if "." in v:
                return ("lit", float(v))
            return ("lit", int(v.rstrip("u")))
        if kind == "str":
            return ("lit", _unquote(v))
        if kind == "id":
            if v == "true":
                return ("lit", True)
            if v == "false":
                return ("lit", False)
            if v == "null":
                return ("lit", None)
            if self.peek()[1] == "(":
                return ("call", v, self.args())
            return ("ident", v)
        if v == "(":
            e = self.ternary()
            self.take(")")
            return e
        if v == "[":
            items = []
            while self.peek()[1] != "]":
                items.append(self.ternary())
                if self.peek()[1] == ",":
                    self.take()
            self.take("]")
            return ("list", items)
        if v == "{":
            items = []
            while self.peek()[1] != "}":
                k = self.ternary()
                self.take(":")
                items.append((k, self.ternary()))
                if self.peek()[1] == ",":
                    self.take()
            self.take("}")
            return ("map", items)
        raise CelError("Syntax error: unexpected '%s'" % v)


def compile_expr(text):
    return Parser(text).parse()


_MACROS = ("all", "exists", "exists_one", "map", "filter")


_CEL_NAMES = {"boolean": "bool", "integer": "int", "number": "double", "string": "string", "array": "list",
              "object": "map", "null": "null_type"}


def _type_name(v):
    return _CEL_NAMES[json_type_name(v)]


class Env:
    def __init__(self, vars_, lazy=None):
        self.vars = vars_
        self.lazy = lazy or {}   # name -> callable returning the value (for `variables`)


def evaluate(ast, env, scope=None):
    scope = scope or {}
    k = ast[0]
    if k == "lit":
        return ast[1]
    if k == "ident":
        n = ast[1]
        if n in scope:
            return scope[n]
        if n in env.vars:
            return env.vars[n]
        raise CelError("undeclared reference to '%s'" % n)
    if k == "list":
        return [evaluate(x, env, scope) for x in ast[1]]
    if k == "map":
        return {evaluate(a, env, scope): evaluate(b, env, scope) for a, b in ast[1]}
    if k == "field":
        base = ast[1]
        if base[0] == "ident" and base[1] == "variables" and "variables" not in scope:
            name = ast[2]
            if name not in env.lazy:
                raise CelError("undeclared reference to 'variables.%s'" % name)
            return env.lazy[name]()
        obj = evaluate(base, env, scope)
        return _select(obj, ast[2])
    if k == "index":
        obj = evaluate(ast[1], env, scope)
        idx = evaluate(ast[2], env, scope)
        if isinstance(obj, list):
            if not isinstance(idx, int) or isinstance(idx, bool):
                raise CelError("no such overload")
            if not 0 <= idx < len(obj):
                raise CelError("index out of bounds: %d" % idx)
            return obj[idx]
        if isinstance(obj, dict):
            if idx not in obj:
                raise CelError("no such key: %s" % idx)
            return obj[idx]
        raise CelError("no such overload")
    if k == "?:":
        c = evaluate(ast[1], env, scope)
        if not isinstance(c, bool):
            raise CelError("no such overload")
        return evaluate(ast[2] if c else ast[3], env, scope)
    if k == "!":
        v = evaluate(ast[1], env, scope)
        if not isinstance(v, bool):
            raise CelError("no such overload")
        return not v
    if k == "neg":
        v = evaluate(ast[1], env, scope)
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise CelError("no such overload")
        return -v
    if k in ("&&", "||"):
        return _logic(k, ast, env, scope)
    if k in ("==", "!=", "<", "<=", ">", ">=", "in", "+", "-", "*", "/", "%"):
        return _binop(k, evaluate(ast[1], env, scope), evaluate(ast[2], env, scope))
    if k == "call":
        name, args = ast[1], ast[2]
        if name == "has":
            if len(args) != 1 or args[0][0] != "field":
                raise CelError("invalid argument to has() macro")
            obj = evaluate(args[0][1], env, scope)
            if isinstance(obj, dict):
                return args[0][2] in obj
            raise CelError("invalid type for field selection.")
        vals = [evaluate(a, env, scope) for a in args]
        return _function(name, vals)
    if k == "method":
        target, name, args = ast[1], ast[2], ast[3]
        if name in _MACROS:
            return _macro(name, evaluate(target, env, scope), args, env, scope)
        obj = evaluate(target, env, scope)
        vals = [evaluate(a, env, scope) for a in args]
        return _method(obj, name, vals)
    raise CelError("unsupported expression")


def _select(obj, name):
    if isinstance(obj, dict):
        if name not in obj:
            raise CelError("no such key: %s" % name)
        return obj[name]
    raise CelError("no such key: %s" % name if obj is None else "type '%s' does not support field selection"
                   % _type_name(obj))


def _logic(op, ast, env, scope):
    err = None
    try:
        a = evaluate(ast[1], env, scope)
        if not isinstance(a, bool):
            raise CelError("no such overload")
        if op == "&&" and a is False:
            return False
        if op == "||" and a is True:
            return True
    except CelError as e:
        err = e
    b = evaluate(ast[2], env, scope) if err is None else _try(ast[2], env, scope)
    if err is not None:
        if (op == "&&" and b is False) or (op == "||" and b is True):
            return b
        raise err
    if not isinstance(b, bool):
        raise CelError("no such overload")
    return b


def _try(ast, env, scope):
    try:
        return evaluate(ast, env, scope)
    except CelError:
        return None


def _binop(op, a, b):
    if op == "==":
        return _eq(a, b)
    if op == "!=":
        return not _eq(a, b)
    if op == "in":
        if isinstance(b, list):
            return any(_eq(a, x) for x in b)
        if isinstance(b, dict):
            return a in b
        raise CelError("no such overload")
    ta, tb = _type_name(a), _type_name(b)
    num = ("int", "double")
    if op in ("<", "<=", ">", ">="):
        if not (ta == tb and ta in ("int", "double", "string", "bool")) and not (ta in num and tb in num):
            raise CelError("no such overload")
        return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]
    if op == "+":
        if ta == tb and ta in ("int", "double", "string", "list"):
            return a + b
        raise CelError("no such overload")
    if ta != tb or ta not in num:
        raise CelError("no such overload")
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if b == 0:
        raise CelError("division by zero" if op == "/" else "modulus by zero")
    if op == "/":
        return a / b if ta == "double" else int(a / b)
    return a % b if a >= 0 else -((-a) % b)


def _eq(a, b):
    if _type_name(a) != _type_name(b):
        if _type_name(a) in ("int", "double") and _type_name(b) in ("int", "double"):
            return a == b
        return False
    return a == b


def _function(name, vals):
    if name == "size" and len(vals) == 1:
        return _method(vals[0], "size", [])
    if name == "string" and len(vals) == 1:
        v = vals[0]
        return ("true" if v else "false") if isinstance(v, bool) else str(v)
    if name == "int" and len(vals) == 1:
        try:
            return int(vals[0])
        except (TypeError, ValueError):
            raise CelError("cannot convert to int")
    if name == "double" and len(vals) == 1:
        return float(vals[0])
    if name == "type" and len(vals) == 1:
        return _type_name(vals[0])
    raise CelError("undeclared reference to '%s'" % name)


def _method(obj, name, vals):
    if name == "size" and not vals:
        if isinstance(obj, (str, list, dict)):
            return len(obj)
        raise CelError("no such overload")
    if isinstance(obj, str):
        if name == "startsWith":
            return obj.startswith(vals[0])
        if name == "endsWith":
            return obj.endswith(vals[0])
        if name == "contains":
            return vals[0] in obj
        if name == "matches":
            return re.search(vals[0], obj) is not None
        if name == "lowerAscii":
            return obj.lower()
        if name == "upperAscii":
            return obj.upper()
        if name == "trim":
            return obj.strip()
        if name == "split":
            return obj.split(vals[0])
        if name == "indexOf":
            return obj.find(vals[0])
    if isinstance(obj, list) and name == "join":
        return (vals[0] if vals else "").join(obj)
    raise CelError("found no matching overload for '%s' applied to '%s'" % (name, _type_name(obj)))


def _macro(name, target, args, env, scope):
    if len(args) != 2 or args[0][0] != "ident":
        raise CelError("invalid macro arguments")
    var = args[0][1]
    if isinstance(target, dict):
        items = list(target.keys())
    elif isinstance(target, list):
        items = target
    else:
        raise CelError("no such overload")

    def run(x):
        s = dict(scope)
        s[var] = x
        return evaluate(args[1], env, s)
    if name == "map":
        return [run(x) for x in items]
    if name == "filter":
        return [x for x in items if _truth(run(x))]
    if name == "exists_one":
        return sum(1 for x in items if _truth(run(x))) == 1
    # all/exists: an error is absorbed when another element decides the result.
    err = None
    for x in items:
        try:
            v = _truth(run(x))
        except CelError as e:
            err = err or e
            continue
        if name == "all" and not v:
            return False
        if name == "exists" and v:
            return True
    if err is not None:
        raise err
    return name == "all"


def _truth(v):
    if not isinstance(v, bool):
        raise CelError("no such overload")
    return v
