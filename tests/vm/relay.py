#!/usr/bin/env python3
"""Relay one connection between stdin/stdout and a TCP server: QEMU's guestfwd=...-cmd: runs this
once per guest connection with the guest's socket as stdin and stdout. (A guestfwd to a tcp:
chardev would carry one connection for the VM's whole life; HTTP clients open several.)

usage: relay.py HOST PORT"""
import os
import selectors
import socket
import sys


def main():
    host, port = sys.argv[1], int(sys.argv[2])
    guest = socket.socket(fileno=os.dup(0))
    os.close(0)
    os.close(1)
    server = socket.create_connection((host, port), timeout=10)
    server.settimeout(None)
    sel = selectors.DefaultSelector()
    peer = {guest: server, server: guest}
    for s in peer:
        sel.register(s, selectors.EVENT_READ)
    open_dirs = 2
    while open_dirs:
        for key, _ in sel.select():
            src = key.fileobj
            try:
                data = src.recv(65536)
            except OSError:
                data = b""
            dst = peer[src]
            if data:
                try:
                    dst.sendall(data)
                    continue
                except OSError:
                    pass
            # EOF one way: pass the half-close on, keep the other direction running.
            sel.unregister(src)
            open_dirs -= 1
            try:
                dst.shutdown(socket.SHUT_WR)
            except OSError:
                pass
    guest.close()
    server.close()


if __name__ == "__main__":
    main()
