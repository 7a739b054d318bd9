#!/usr/bin/env bash
# Installs everything Turnout needs on a fresh Debian 12 machine and builds
# it: apt packages (peers, tools), the Rust workspace (release), the Python
# workbench in .venv. Idempotent: a second run only checks.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(
  build-essential pkg-config clang iproute2 ethtool procps util-linux kmod
  python3 python3-venv python3-pip
  dpdk-dev                     # dpdk-testpmd: memif / virtio-user / vhost peer and baseline
  openvswitch-switch openvswitch-switch-dpdk   # OVS userspace (afxdp) and OVS-DPDK peers
  iperf3 iputils-ping netsniff-ng tcpdump      # kernel-stack peers and tools
  chromium                     # report rendering test
  qemu-system-x86 busybox-static lz4           # vhost-user guest test (tests/vm)
)

need_root() { [ "$(id -u)" = 0 ] || { echo "setup: must run as root (apt, namespaces, hugepages)" >&2; exit 1; }; }

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  need_root
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Rust: the machine image ships rustup's toolchain; fall back to Debian's.
if ! command -v cargo >/dev/null 2>&1; then
  if [ -x "$HOME/.cargo/bin/cargo" ]; then
    export PATH="$HOME/.cargo/bin:$PATH"
  else
    need_root
    apt-get install -y -qq cargo rustc >/dev/null
  fi
fi

echo "setup: building the Rust workspace (release)"
cargo build --release --workspace --bins --examples -q

if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
if ! .venv/bin/python -c "import turnout, pyroute2, matplotlib, rich, pytest, mypy, ruff" 2>/dev/null; then
  echo "setup: installing the Python workbench into .venv"
  .venv/bin/pip install -q --upgrade pip
  .venv/bin/pip install -q -e 'python[dev]'
fi
echo "setup: done"
