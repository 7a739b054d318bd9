#!/bin/sh
# Builds the guest for the vhost-user QEMU test (crates/ports/tests/vhost_qemu.rs):
# a Debian cloud kernel and a tiny initramfs (busybox-static + the virtio-net
# modules, the bridge modules for the bench's QEMU VNF + tests/vm/init). Everything comes from Debian packages; nothing
# is installed on the host (packages are downloaded and unpacked into the
# cache directory). Idempotent: prints the cache directory and exits early
# when the assets exist.
#
#   tests/vm/build-assets.sh [CACHE_DIR]     (default /var/cache/turnout-vm)
#
# Outputs CACHE_DIR/vmlinux (the uncompressed kernel, an ELF with a PVH
# entry point that QEMU boots directly, skipping the bzImage decompressor,
# which is slow under TCG and under these machines' KVM) and
# CACHE_DIR/initramfs.gz.
# Needs: apt-get (download only; `apt-get update` done), dpkg-deb, GNU grep
# (-P), od, gzip, and the kernel's compressor (lz4 for Debian 12's cloud
# kernel; zstd, xz and gzip are tried too). busybox provides cpio.
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
CACHE=${1:-${TURNOUT_VM_CACHE:-/var/cache/turnout-vm}}
mkdir -p "$CACHE"
if [ -s "$CACHE/vmlinux" ] && [ -s "$CACHE/initramfs.gz" ] && [ "$CACHE/initramfs.gz" -nt "$HERE/init" ] \
        && [ "$CACHE/initramfs.gz" -nt "$0" ]; then
    echo "$CACHE"
    exit 0
fi
WORK=$(mktemp -d "$CACHE/build.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"

# Kernel: the host's if it has one with modules, else Debian's cloud kernel.
PKG=$(apt-cache depends linux-image-cloud-amd64 2>/dev/null | awk '/Depends: linux-image-/{print $2; exit}')
[ -n "$PKG" ] || { echo "build-assets: cannot resolve linux-image-cloud-amd64 (apt-get update?)" >&2; exit 1; }
DEB=$(ls "$CACHE"/"$PKG"_*.deb 2>/dev/null | head -n1 || true)
if [ -z "$DEB" ]; then
    (cd "$CACHE" && apt-get download "$PKG" >&2)
    DEB=$(ls "$CACHE"/"$PKG"_*.deb | head -n1)
fi
dpkg-deb -x "$DEB" kernel
KVER=$(ls kernel/lib/modules | head -n1)
# Uncompress the bzImage payload (as the kernel's scripts/extract-vmlinux
# does: find the compressor's magic, decompress from there, keep an ELF).
VZ=kernel/boot/vmlinuz-"$KVER"
try() { # MAGIC(grep -P) CMD...
    magic=$1; shift
    for off in $(LC_ALL=C grep -aobUP "$magic" "$VZ" 2>/dev/null | cut -d: -f1 | head -n 4); do
        tail -c +$((off + 1)) "$VZ" | "$@" > vmlinux 2>/dev/null || true
        if [ "$(head -c 4 vmlinux | od -An -tx1 | tr -d ' ')" = "7f454c46" ]; then return 0; fi
    done
    return 1
}
try '\x02\x21\x4c\x18' lz4 -dc || try '\x28\xb5\x2f\xfd' zstd -dcq || try '\xfd7zXZ\x00' xz -dc \
    || try '\x1f\x8b\x08' gzip -dc \
    || { echo "build-assets: cannot uncompress $VZ (install lz4, zstd, xz-utils or gzip)" >&2; exit 1; }
cp vmlinux "$CACHE/vmlinux.new"

# busybox-static: the host's if installed, else the unpacked package.
if [ -x /bin/busybox ] && file -L /bin/busybox 2>/dev/null | grep -q static; then
    BB=/bin/busybox
else
    (apt-get download busybox-static >&2)
    dpkg-deb -x busybox-static_*.deb bb
    BB=bb/bin/busybox
fi

mkdir -p root/bin root/lib root/proc root/sys root/dev root/tmp
cp "$BB" root/bin/busybox
cp "$HERE/init" root/init
chmod 755 root/init root/bin/busybox
M=kernel/lib/modules/$KVER/kernel
for m in drivers/virtio/virtio.ko drivers/virtio/virtio_ring.ko \
         drivers/virtio/virtio_pci_modern_dev.ko drivers/virtio/virtio_pci_legacy_dev.ko \
         drivers/virtio/virtio_pci.ko net/core/failover.ko drivers/net/net_failover.ko \
         drivers/net/virtio_net.ko net/llc/llc.ko net/802/stp.ko net/bridge/bridge.ko; do
    f=$(ls "$M/$m"* 2>/dev/null | head -n1 || true)
    [ -n "$f" ] || continue   # built in, or not split out in this kernel
    case "$f" in
        *.xz) xz -dc "$f" > root/lib/$(basename "$m") ;;
        *.zst) zstd -dcq "$f" > root/lib/$(basename "$m") ;;
        *) cp "$f" root/lib/ ;;
    esac
done
BBABS=$(cd "$(dirname "$BB")" && pwd)/$(basename "$BB")
(cd root && find . | "$BBABS" cpio -o -H newc 2>/dev/null) > initramfs.cpio
[ -s initramfs.cpio ] || { echo "build-assets: cpio failed" >&2; exit 1; }
gzip -9 < initramfs.cpio > "$CACHE/initramfs.gz.new"
mv "$CACHE/vmlinux.new" "$CACHE/vmlinux"
mv "$CACHE/initramfs.gz.new" "$CACHE/initramfs.gz"
echo "$CACHE"
