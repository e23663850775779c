#!/bin/sh
# The recipe of the real-boot test's guest: a Debian 12 rootfs with systemd as PID 1, the shared
# libraries cloudnode links, and a kernel plus initrd that the host boots with -kernel/-initrd.
# tests/vm/vmtest.py caches the result under the build dir keyed by a hash of this file (and the
# mirror), so any change here rebuilds the rootfs.
#
# usage: build-rootfs.sh MIRROR DEST      (as root; DEST must not exist)
# Produces DEST/root (the tree), DEST/vmlinuz and DEST/initrd.img.
set -eu

mirror=$1
dest=$2
suite=bookworm

# dbus: the agent asks systemd for a daemon-reload over the system bus after writing the kubelet
# drop-in. curl: the stand-in for kubelet registration. cloud-init: the provisioning of the
# cloud-init boots (Debian's, as its cloud images carry it; debootstrap does not resolve virtual
# packages, so python3-cryptography's cffi backend is named). The rest is what the binaries link.
packages="systemd systemd-sysv udev dbus linux-image-amd64 ca-certificates iproute2 curl
cloud-init python3-cffi-backend
libyaml-0-2 libjson-c5 libmnl0 libexpat1 libssl3 libsystemd0"

mkdir "$dest"
debootstrap --variant=minbase --include="$(echo $packages | tr ' ' ,)" \
        "$suite" "$dest/root" "$mirror"

root=$dest/root
# A small initrd with just what mounts a virtio ext4 root: under TCG every MB of initrd and every
# module loaded at boot costs time. And the IDE CD-ROM, where Proxmox VE attaches its cloud-init
# drive: cloud-init's generator looks for the drive when the root is mounted, before udev loads
# modules from it (Debian's cloud images' initrds carry these drivers too).
sed -i 's/^MODULES=.*/MODULES=list/' "$root/etc/initramfs-tools/initramfs.conf"
printf 'virtio_pci\nvirtio_blk\next4\nata_piix\nsr_mod\n' >> "$root/etc/initramfs-tools/modules"
chroot "$root" update-initramfs -u -k all

set -- "$root"/boot/vmlinuz-*
cp "$1" "$dest/vmlinuz"
set -- "$root"/boot/initrd.img-*
mv "$1" "$dest/initrd.img"

# Every boot of a copy of this tree is a first boot: systemd applies the preset files (this is
# how units that Ignition enables get enabled) and commits a fresh machine id.
echo uninitialized > "$root/etc/machine-id"
rm -f "$root/var/lib/dbus/machine-id"
# A persistent journal, so the host can read the whole boot, shutdown included, from the disk.
mkdir -p "$root/var/log/journal"
# debootstrap copies the build host's name; the guest gets its own.
echo cloudnode-vmtest > "$root/etc/hostname"
printf '127.0.0.1\tlocalhost\n127.0.1.1\tcloudnode-vmtest\n::1\tlocalhost ip6-localhost ip6-loopback\n' \
        > "$root/etc/hosts"
# Debian's Ignition is built with SELinux relabeling on: its files stage ends by running setfiles
# with the target's policy. This guest has no SELinux policy, which is said in a file_contexts
# that labels nothing, so Ignition's files stage runs to completion.
mkdir -p "$root/etc/selinux/none/contexts/files"
printf 'SELINUX=disabled\nSELINUXTYPE=none\n' > "$root/etc/selinux/config"
printf '/.*\t<<none>>\n' > "$root/etc/selinux/none/contexts/files/file_contexts"
# The Ignition boots are provisioned by Ignition alone, as on the distributions Ignition serves;
# a cloud-init boot removes this file from its copy of the tree (cloud-init's own switch).
touch "$root/etc/cloud/cloud-init.disabled"
# The root file system is the first virtio disk.
printf '/dev/vda\t/\text4\tdefaults\t0\t1\n' > "$root/etc/fstab"

# Nothing the guest needs at run time; smaller trees make faster disk images.
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* \
        "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/locale/* \
        "$root"/usr/share/info/*
