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
  containernetworking-plugins  # host-local / static IPAM, tuning: turnout-cni tests (python/tests/turnoutd/test_cni.py)
  openssh-server               # sshd of the remote campaign's namespace hosts (python/tests/test_remote_system.py)
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
  # Install without starting the packages' services (sshd on port 22, the
  # system Open vSwitch): the tests and the bench start private instances of
  # their own. policy-rc.d is Debian's switch for that; one the machine
  # already has is left as it is.
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
    chmod 755 /usr/sbin/policy-rc.d
    trap 'rm -f /usr/sbin/policy-rc.d' EXIT
  fi
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  if [ -n "$(trap -p EXIT)" ]; then rm -f /usr/sbin/policy-rc.d; trap - EXIT; fi
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

# The Python environments (mostly downloads) install while cargo builds;
# their output goes to target/setup-python.log.
python_envs() {
  if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
  fi
  if ! .venv/bin/python -c "import turnout, pyroute2, matplotlib, rich, paramiko, pytest, xdist, mypy, ruff" 2>/dev/null; then
    echo "setup: installing the Python workbench into .venv"
    .venv/bin/pip install -q --upgrade pip
    .venv/bin/pip install -q -e 'python[dev]'
  fi
  # os-ken, the OpenFlow controller of python/tests/turnoutd/test_openflow_controller.py,
  # in a venv of its own (its eventlet/oslo dependencies stay out of the
  # workbench's). Ryu does not run on Python 3.11.
  OSKEN_VERSION=4.2.2
  if [ ! -x .venv-osken/bin/python ]; then
    python3 -m venv .venv-osken
  fi
  if ! .venv-osken/bin/python -c "import os_ken" 2>/dev/null; then
    echo "setup: installing os-ken $OSKEN_VERSION into .venv-osken"
    .venv-osken/bin/pip install -q "os-ken==$OSKEN_VERSION"
  fi
  # Faucet, the production OpenFlow controller of python/tests/turnoutd/test_faucet.py,
  # on os-ken too, but in a venv of its own: faucet 1.10.12 pins os_ken==3.1.0
  # (the os-ken switch suite above runs on 4.2.2). Every dependency resolves
  # from PyPI on Python 3.11.
  FAUCET_VERSION=1.10.12
  if [ ! -x .venv-faucet/bin/python ]; then
    python3 -m venv .venv-faucet
  fi
  if ! .venv-faucet/bin/python -c "import faucet, os_ken" 2>/dev/null \
      || [ ! -x .venv-faucet/bin/osken-manager ]; then
    echo "setup: installing faucet $FAUCET_VERSION into .venv-faucet"
    .venv-faucet/bin/pip install -q "faucet==$FAUCET_VERSION"
  fi
}
mkdir -p target
python_envs >target/setup-python.log 2>&1 &
python_pid=$!

# The binaries and the example a test runs (profile: $TURNOUT_PROFILE).
bash scripts/build-bins.sh

# cnitool (the CNI project's own runtime stand-in) for turnout-cni's tests.
CNITOOL_VERSION=v1.3.1
if [ ! -x target/tools/cnitool ]; then
  command -v go >/dev/null 2>&1 || export PATH="/usr/local/go/bin:$PATH"
  if ! command -v go >/dev/null 2>&1; then
    need_root
    apt-get install -y -qq --no-install-recommends golang-go >/dev/null
  fi
  echo "setup: building cnitool $CNITOOL_VERSION"
  GOBIN="$PWD/target/tools" go install "github.com/containernetworking/cni/cnitool@$CNITOOL_VERSION"
fi

if ! wait "$python_pid"; then
  cat target/setup-python.log >&2
  echo "setup: installing the Python environments failed (target/setup-python.log)" >&2
  exit 1
fi
cat target/setup-python.log
echo "setup: done"
