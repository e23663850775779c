#!/bin/sh
# Makes the builder base image of the Containerfile locally, for machines that reach a Debian
# mirror but no container registry: a debootstrap'd Debian 12 (minbase) with the build
# dependencies preinstalled, imported with `podman import`. The root filesystem tarball is cached
# under CACHE_DIR keyed by this script and the mirror, so a machine builds it once.
#
# usage: image-base.sh IMAGE CACHE_DIR [MIRROR]      (as root; podman and debootstrap installed)
set -eu

image=$1
cache=$2
mirror=${3:-http://deb.debian.org/debian}
suite=bookworm
packages=$(grep -v '^#' "$(dirname "$0")/image-build-deps")

key=$( (cat "$0" "$(dirname "$0")/image-build-deps"; echo "$mirror") | sha256sum | cut -c1-16)
tarball="$cache/cloudnode-build-base-$suite-$key.tar"

if podman image exists "$image" &&
   [ "$(podman image inspect --format '{{index .Labels "io.cloudnode.base-key"}}' "$image" 2>/dev/null)" = "$key" ]; then
        echo "base image $image cached"
        exit 0
fi

mkdir -p "$cache"
exec 9>"$cache/lock"
flock 9
if [ ! -f "$tarball" ]; then
        rm -f "$cache"/cloudnode-build-base-*.tar
        tmp=$(mktemp -d "$cache/rootfs.XXXXXX")
        trap 'rm -rf "$tmp"' EXIT
        echo "building $image with debootstrap from $mirror (a few minutes, once) ..."
        debootstrap --variant=minbase --include="$(echo $packages | tr ' ' ,)" \
                "$suite" "$tmp/root" "$mirror" > "$cache/debootstrap.log" 2>&1 || {
                tail -n 30 "$cache/debootstrap.log" >&2
                exit 1
        }
        rm -rf "$tmp"/root/var/cache/apt/archives/*.deb "$tmp"/root/var/lib/apt/lists/*
        tar --numeric-owner -C "$tmp/root" -cf "$tarball.tmp" .
        mv "$tarball.tmp" "$tarball"
fi
podman import --change "LABEL io.cloudnode.base-key=$key" --change "CMD [\"/bin/sh\"]" \
        "$tarball" "$image" > /dev/null
echo "base image $image imported from $tarball"
