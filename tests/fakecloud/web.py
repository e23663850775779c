"""Request and response values passed between the HTTP server and the service modules."""
import json
import time
import urllib.parse
from email.utils import formatdate


class Request:
    def __init__(self, method, raw_path, headers, body, state):
        self.method = method
        self.raw_path = raw_path
        parsed = urllib.parse.urlsplit(raw_path)
        self.path = urllib.parse.unquote(parsed.path) or "/"
        self.query_string = parsed.query
        self.query = {}
        for k, v in urllib.parse.parse_qsl(parsed.query, keep_blank_values=True):
            self.query.setdefault(k, v)
        self.query_all = urllib.parse.parse_qs(parsed.query, keep_blank_values=True)
        self.headers = headers
        self.body = body
        self.state = state
        # Filled in by the router so the request log can name them.
        self.platform = None
        self.service = None
        self.log_path = None
        self.instance_id = None
        self.base_url = ""

    def header(self, name, default=None):
        return self.headers.get(name, default)

    def json(self):
        """Parsed JSON body, or raises ValueError."""
        if not self.body:
            raise ValueError("empty body")
        return json.loads(self.body.decode("utf-8"))


class Response:
    def __init__(self, status=200, body=b"", content_type="text/plain", headers=None, server=None):
        self.status = status
        self.body = body.encode("utf-8") if isinstance(body, str) else body
        self.headers = [("Content-Type", content_type)] if content_type else []
        self.headers.extend(headers or [])
        self.server = server
        self.reason = None  # the status line's reason phrase, when not the standard one

    def add(self, name, value):
        self.headers.append((name, str(value)))
        return self


def text(body, status=200, content_type="text/plain", **kw):
    return Response(status, body, content_type, **kw)


def json_response(obj, status=200, content_type="application/json", indent=None, **kw):
    body = json.dumps(obj, indent=indent)
    return Response(status, body, content_type, **kw)


def http_date(t=None):
    return formatdate(t if t is not None else time.time(), usegmt=True)


def iso8601(t):
    """RFC 3339 in UTC with +00:00, as the Hetzner API writes timestamps."""
    return time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(t))


def iso8601z(t, micro=False):
    """UTC with a Z suffix, as Keystone and Nova write timestamps."""
    s = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t))
    if micro:
        s += ".%06d" % int((t % 1) * 1e6)
    return s + "Z"
