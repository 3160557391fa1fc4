#!/usr/bin/env bash
# Builds aifs and installs it where people and mount(8) find it: /usr/local/bin/aifs, and
# /sbin/mount.fuse.aifs (a link to it) so that "mount -t fuse.aifs SRC MOUNTPOINT -o OPTS" and
# /etc/fstab lines of type fuse.aifs work. Installs fuse3 (fusermount3, mount.fuse3) if missing.
# Needs root (or sudo). Usage: scripts/install.sh [PREFIX]   (default PREFIX: /usr/local)
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/setup.sh
need_packages fuse3
build_aifs
prefix=${1:-/usr/local}
sudo=""
[ "$(id -u)" -eq 0 ] || sudo=sudo
$sudo install -D -m 0755 bin/aifs "$prefix/bin/aifs"
$sudo ln -sf "$prefix/bin/aifs" /sbin/mount.fuse.aifs
echo "installed $prefix/bin/aifs and /sbin/mount.fuse.aifs"
