#!/usr/bin/env bash
# Base image root file system for Consortia algorithm images (no registry exists here).
#
#   debootstrap.sh OUT.tar
#
# Builds a minimal Debian bookworm (python3 = 3.11, matching the host's cp311 wheels) with
# `debootstrap --variant=minbase` from the Debian mirror in apt's configured sources, strips
# caches/docs, and writes it as a tarball for `podman import`. Runs as root.
set -euo pipefail
out=$1
mirror=${CONSORTIA_DEBIAN_MIRROR:-$(grep -hoE 'https?://deb\.debian\.org/debian/?' \
    /etc/apt/sources.list /etc/apt/sources.list.d/* 2>/dev/null | head -1 || true)}
mirror=${mirror:-http://deb.debian.org/debian}
work=$(mktemp -d "${TMPDIR:-/tmp}/consortia-rootfs.XXXXXX")
trap 'rm -rf "$work"' EXIT
debootstrap --variant=minbase --include=python3,python3-pip,ca-certificates \
    bookworm "$work/rootfs" "$mirror" >&2
rm -rf "$work/rootfs/var/cache/apt/archives/"*.deb "$work/rootfs/var/lib/apt/lists/"* \
       "$work/rootfs/usr/share/doc" "$work/rootfs/usr/share/man" "$work/rootfs/usr/share/locale"
# An unprivileged user for tasks (uid/gid 10001), no login shell, no home writes needed.
echo 'task:x:10001:10001:consortia task:/task:/usr/sbin/nologin' >> "$work/rootfs/etc/passwd"
echo 'task:x:10001:' >> "$work/rootfs/etc/group"
tar --numeric-owner -C "$work/rootfs" -cf "$out.partial" .
mv "$out.partial" "$out"
