#!/bin/sh
# Collects what a program needs at run time into DEST, for a FROM scratch image: the program,
# every shared library it links (as ldd resolves them, at the same paths), the dynamic loader,
# the CA bundle for TLS, and passwd/group entries for the unprivileged uid. Nothing else: no
# shell, no package manager.
#
# usage: image-rootfs.sh DEST PROGRAM...
set -eu

dest=$1
shift
mkdir -p "$dest/usr/bin" "$dest/etc/ssl/certs" "$dest/tmp"
chmod 1777 "$dest/tmp"

copy() {
        # Keep the path the loader looks up; store the real file there, not the symlink.
        mkdir -p "$dest$(dirname "$1")"
        cp -L "$1" "$dest$1"
}

for prog in "$@"; do
        install -m 0755 "$prog" "$dest/usr/bin/$(basename "$prog")"
        ldd "$prog" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' | sort -u |
        while read -r lib; do
                copy "$lib"
        done
done

cp -L /etc/ssl/certs/ca-certificates.crt "$dest/etc/ssl/certs/ca-certificates.crt"
printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' \
        > "$dest/etc/passwd"
printf 'root:x:0:\nnonroot:x:65532:\n' > "$dest/etc/group"
printf 'hosts: files dns\n' > "$dest/etc/nsswitch.conf"
