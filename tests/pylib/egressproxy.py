"""An HTTP CONNECT egress proxy on loopback for programs that call a cloud's real host name and
take no endpoint option: it tunnels NAME:443 (each name given) to a fake's port and answers 403
to anything else, keeping the refused request lines in .refused. The client trusts the fake's
test CA (FakeCloud(tls_names=[NAME]).ca_file: SSL_CERT_FILE for a Go program,
REQUESTS_CA_BUNDLE for Python's requests) and is given .url as HTTPS_PROXY; nothing else can be
reached through it.

    proxy = EgressProxy(fake_port, ["api.hetzner.cloud"])
    ... run the client with HTTPS_PROXY=proxy.url ...
    proxy.shutdown()"""
import select
import socket
import socketserver
import threading


class EgressProxy(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, target_port, names):
        self.target_port = target_port
        self.allowed = {n.lower() + ":443" for n in names}
        self.refused = []
        self.tunnels = 0
        super().__init__(("127.0.0.1", 0), _ProxyHandler)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self):
        return "http://127.0.0.1:%d" % self.server_address[1]


class _ProxyHandler(socketserver.StreamRequestHandler):
    def handle(self):
        line = self.rfile.readline(65536).decode("latin-1").strip()
        while self.rfile.readline(65536) not in (b"\r\n", b"\n", b""):
            pass
        method, _, rest = line.partition(" ")
        target = rest.split(" ", 1)[0]
        if method != "CONNECT" or target.lower() not in self.server.allowed:
            self.server.refused.append(line)
            self.wfile.write(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            return
        with socket.create_connection(("127.0.0.1", self.server.target_port)) as up:
            self.server.tunnels += 1
            self.wfile.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            self.wfile.flush()
            ends = [self.connection, up]
            while True:
                ready, _, _ = select.select(ends, [], [], 60)
                if not ready:
                    return
                for s in ready:
                    data = s.recv(65536)
                    if not data:
                        return
                    (up if s is self.connection else self.connection).sendall(data)
