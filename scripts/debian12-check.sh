#!/usr/bin/env bash
# Run the README's two commands as a new user would, in a fresh Debian 12
# chroot: Debian's python3 only, no pyenv, no venv made beforehand. Needs
# root, debootstrap and the Debian and PyPI registries; not part of CI
# (the second command downloads torch's CUDA wheels, about 5 GiB).
#
#   bash scripts/debian12-check.sh ROOT [setup|test|all]   (default: all)
#
# ROOT: the chroot directory; made with `debootstrap --variant=minbase
# bookworm` when it does not exist. The committed HEAD of this clone is
# cloned into ROOT/root/loaderx-in-C (so commit first). Prints each
# command's time and what it downloaded (apt archives, pip cache).
set -euo pipefail
root=${1:?usage: bash scripts/debian12-check.sh ROOT [setup|test|all]}
what=${2:-all}
src=$(cd "$(dirname "$0")/.." && pwd)
[ "$(id -u)" -eq 0 ] || { echo "debian12-check: needs root (chroot)" >&2; exit 1; }
if [ ! -x "$root/bin/bash" ]; then
    command -v debootstrap >/dev/null || apt-get install -y -qq debootstrap
    debootstrap --variant=minbase bookworm "$root" http://deb.debian.org/debian
fi
cp /etc/resolv.conf "$root/etc/resolv.conf"
# A network whose HTTPS goes through a proxy with its own CA: the chroot
# trusts the same local CAs as the host (none on an ordinary network).
if ls /usr/local/share/ca-certificates/*.crt >/dev/null 2>&1; then
    mkdir -p "$root/usr/local/share/ca-certificates"
    cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
    [ -x "$root/usr/sbin/update-ca-certificates" ] && chroot "$root" update-ca-certificates >/dev/null
fi
for d in proc sys dev; do
    mountpoint -q "$root/$d" || mount --bind "/$d" "$root/$d"
done
trap 'for d in dev sys proc; do umount "$root/$d" 2>/dev/null || true; done' EXIT
# A fresh clone for command 1; command 2 alone reuses the one command 1 set up.
if [ "$what" != test ] || [ ! -d "$root/root/loaderx-in-C" ]; then
    rm -rf "$root/root/loaderx-in-C"
    git clone -q "$src" "$root/root/loaderx-in-C"
fi

in_chroot() {
    chroot "$root" /usr/bin/env -i HOME=/root TERM=dumb LANG=C.UTF-8 \
        PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        bash -c "cd /root/loaderx-in-C && $1"
}
downloaded() {
    local apt pip
    apt=$(du -sk "$root/var/cache/apt/archives" | cut -f1)
    pip=$(du -sk "$root/root/.cache/pip" 2>/dev/null | cut -f1 || echo 0)
    echo "debian12-check: downloaded so far: apt $((apt / 1024)) MiB, pip $((${pip:-0} / 1024)) MiB"
}
# Keep the downloaded .deb files, so their size can be read afterwards.
echo 'Binary::apt::APT::Keep-Downloaded-Packages "true";' > "$root/etc/apt/apt.conf.d/01keep-debs"
# Line 1 and 2 of the README's first fenced block.
cmd1=$(awk '/^```/{n++; next} n==1{print; exit}' "$src/README.md")
cmd2=$(awk '/^```/{n++; next} n==1{c++; if (c==2) {print; exit}}' "$src/README.md")
# run N CMD: README command N in the chroot, timed, then the downloads.
run() {
    echo "debian12-check: command $1: $2"
    local t0
    t0=$(date +%s)
    in_chroot "$2"
    echo "debian12-check: command $1 took $(( $(date +%s) - t0 )) s"
    downloaded
}
if [ "$what" = setup ] || [ "$what" = all ]; then run 1 "$cmd1"; fi
if [ "$what" = test ] || [ "$what" = all ]; then run 2 "$cmd2"; fi
