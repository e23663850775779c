"""metav1.Status errors worded exactly as k8s.io/apimachinery/pkg/api/errors words them,
because clients (and our tests) match on reason, code and sometimes the message."""


class ApiError(Exception):
    def __init__(self, code, reason, message, details=None, headers=None):
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.headers = headers or {}

    def status(self):
        st = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
              "message": self.message, "reason": self.reason}
        if self.details is not None:
            st["details"] = self.details
        st["code"] = self.code
        return st


def qualified(group, resource):
    return resource + "." + group if group else resource


def _details(group, resource, name, **extra):
    d = {}
    if name:
        d["name"] = name
    if group:
        d["group"] = group
    d["kind"] = resource
    d.update(extra)
    return d


def not_found(group, resource, name):
    return ApiError(404, "NotFound", '%s "%s" not found' % (qualified(group, resource), name),
                    _details(group, resource, name))


def already_exists(group, resource, name):
    return ApiError(409, "AlreadyExists", '%s "%s" already exists' % (qualified(group, resource), name),
                    _details(group, resource, name))


def conflict(group, resource, name, why=None):
    why = why or "the object has been modified; please apply your changes to the latest version and try again"
    return ApiError(409, "Conflict", 'Operation cannot be fulfilled on %s "%s": %s'
                    % (qualified(group, resource), name, why), _details(group, resource, name))


def bad_request(message):
    return ApiError(400, "BadRequest", message)


def unauthorized():
    return ApiError(401, "Unauthorized", "Unauthorized")


def forbidden(group, resource, name, err):
    if not resource:
        msg = "forbidden: %s" % err
    elif not name:
        msg = "%s is forbidden: %s" % (qualified(group, resource), err)
    else:
        msg = '%s "%s" is forbidden: %s' % (qualified(group, resource), name, err)
    return ApiError(403, "Forbidden", msg, _details(group, resource, name) if resource else {})


def method_not_allowed():
    return ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource", {})


def path_not_found():
    return ApiError(404, "NotFound", "the server could not find the requested resource", {})


def unsupported_patch(accepted):
    return ApiError(415, "UnsupportedMediaType",
                    "the body of the request was in an unknown format - accepted media types include: "
                    + ", ".join(accepted))


def unsupported_media(ctype):
    return ApiError(415, "UnsupportedMediaType", 'the body of the request was in an unknown format - '
                    'accepted media types include: application/json, application/yaml')


def not_acceptable(types=("application/json", "application/yaml")):
    return ApiError(406, "NotAcceptable", "only the following media types are accepted: " + ", ".join(types))


def gone(message):
    return ApiError(410, "Expired", message)


def too_large_rv(rv, current):
    return ApiError(504, "Timeout", "Too large resource version: %s, current: %s" % (rv, current),
                    {"causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
                     "retryAfterSeconds": 1})


class FieldError:
    """One field.Error; type is the ErrorType string (e.g. "Invalid value")."""

    REASONS = {
        "Invalid value": "FieldValueInvalid",
        "Required value": "FieldValueRequired",
        "Forbidden": "FieldValueForbidden",
        "Unsupported value": "FieldValueNotSupported",
        "Duplicate value": "FieldValueDuplicate",
        "Too long": "FieldValueTooLong",
        "Not found": "FieldValueNotFound",
        "Too many": "FieldValueTooMany",
    }

    def __init__(self, field, type_, value=None, detail="", has_value=True):
        self.field = field
        self.type = type_
        self.value = value
        self.detail = detail
        self.has_value = has_value

    def body(self):
        # Mirrors field.Error.ErrorBody(): value is printed only for types that carry one.
        if self.type in ("Invalid value", "Unsupported value", "Duplicate value", "Not found") and self.has_value:
            s = "%s: %s" % (self.type, go_value(self.value))
        else:
            s = self.type
        if self.detail:
            s += ": " + self.detail
        return s

    def __str__(self):
        return "%s: %s" % (self.field, self.body())


def go_value(v):
    """Formats a value as field.Error does (%#v for strings -> quoted, ints plain)."""
    if isinstance(v, str):
        import json
        return json.dumps(v)
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return "null"
    if isinstance(v, (int, float)):
        return str(v)
    import json
    return json.dumps(v, sort_keys=True)


def invalid(group, kind, name, errs):
    qk = kind + "." + group if group else kind
    if len(errs) == 1:
        agg = str(errs[0])
    else:
        agg = "[" + ", ".join(str(e) for e in errs) + "]"
    details = _details(group, kind, name)
    details["causes"] = [{"reason": FieldError.REASONS.get(e.type, "FieldValueInvalid"),
                          "message": e.body(), "field": e.field} for e in errs]
    return ApiError(422, "Invalid", '%s "%s" is invalid: %s' % (qk, name, agg), details)


def for_code(code, message=None, retry_after=None):
    """A Status for an injected failure, shaped like the real error of that code."""
    reasons = {400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound",
               405: "MethodNotAllowed", 409: "Conflict", 410: "Expired", 422: "Invalid",
               429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable",
               504: "Timeout"}
    default_msgs = {429: "Too many requests, please try again later.",
                    500: "Internal error occurred: injected fault",
                    503: "the server is currently unable to handle the request",
                    504: "the server was unable to return a response in the time allotted, but may still be processing the request"}
    details = None
    headers = {}
    if retry_after is not None:
        details = {"retryAfterSeconds": int(retry_after)}
        headers["Retry-After"] = str(int(retry_after))
    return ApiError(code, reasons.get(code, "Unknown"), message or default_msgs.get(code, "injected fault"),
                    details, headers)
