"""QEMU guests as the VNFs of the loopback scenario (``[campaign] vnf = "qemu"``).

The guest is the one the Rust vhost-user test boots
(crates/ports/tests/vhost_qemu.rs): a Debian cloud kernel with a busybox
initramfs built by tests/vm/build-assets.sh into /var/cache/turnout-vm.
Booted with ``turnout_mode=bridge`` its init (tests/vm/init) joins its two
virtio-net NICs in a kernel bridge, so every frame in on one NIC leaves on
the other: a VM forwarding between two vhost-user ports of the SUT.

Acceleration, the same rule as the Rust test: KVM when ``/dev/kvm`` exists
and a guest booted under it reaches init (prints ``TURNOUT_VM_INIT``) within
``KVM_PROBE_S`` (8 s; a working KVM guest takes 1-2 s). Where it does not
(no /dev/kvm, or a nested KVM like these machines' whose guests crawl), the
Rust test falls back to TCG, which still exercises the vhost-user protocol;
the bench instead skips the cell with that reason, because a TCG guest
measures the emulator, not the switch. ``qemu_accel = "tcg"`` runs it under
TCG anyway (a functional check). The probe boots once per process.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .testbed import Testbed

__all__ = ["KVM_PROBE_S", "BridgeVm", "VmError", "VmPlan", "VmUnavailable", "assets", "find_qemu",
           "kvm_status",
           "require_vm", "start_bridge_vm"]

#: seconds a KVM guest gets to reach init before KVM counts as not working
#: (crates/ports/tests/vhost_qemu.rs uses the same 8 s)
KVM_PROBE_S = 8.0
#: seconds a guest gets to bring its bridge up (TCG on a loaded 2-CPU
#: machine: ~10 s measured idle)
BRIDGE_UP_S = 60.0
#: guest memory (MiB): shared memfd, which the vhost-user backend maps
MEM_MB = 256
REPO = Path(__file__).resolve().parents[3]
BUILD_ASSETS = REPO / "tests" / "vm" / "build-assets.sh"


class VmUnavailable(Exception):
    """The QEMU VNF cannot run here (the reason is the message)."""


class VmError(RuntimeError):
    """A guest did not come up."""


def find_qemu() -> str | None:
    return shutil.which("qemu-system-x86_64")


def assets() -> Path:
    """The guest's kernel and initramfs directory (built once by
    tests/vm/build-assets.sh, which downloads Debian packages)."""
    if not BUILD_ASSETS.exists():
        raise VmUnavailable(f"{BUILD_ASSETS} not found (turnout's source tree is needed)")
    p = subprocess.run(["sh", str(BUILD_ASSETS)], capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        raise VmUnavailable("the VM assets could not be built (tests/vm/build-assets.sh): "
                            + p.stderr.strip()[-300:])
    return Path(p.stdout.strip().splitlines()[-1])


def _qemu_args(qemu: str, cache: Path, accel: str, serial: Path, append: str) -> list[str]:
    if accel == "kvm":
        acc = ["-enable-kvm", "-cpu", "host,-arch-capabilities"]
    else:
        acc = ["-accel", "tcg", "-cpu", "qemu64"]
    return [qemu, *acc, "-m", str(MEM_MB), "-smp", "1", "-nodefaults", "-no-user-config",
            "-display", "none", "-no-reboot", "-serial", f"file:{serial}",
            "-kernel", str(cache / "vmlinux"), "-initrd", str(cache / "initramfs.gz"),
            "-append", f"console=ttyS0 panic=-1 loglevel=4 {append}",
            "-object", f"memory-backend-memfd,id=mem,size={MEM_MB}M,share=on",
            "-numa", "node,memdev=mem"]


def _wait_for(serial: Path, marker: str, timeout_s: float,
              proc: subprocess.Popen[bytes] | None = None) -> bool:
    t_end = time.monotonic() + timeout_s
    while time.monotonic() < t_end:
        try:
            if marker in serial.read_text(errors="replace"):
                return True
        except FileNotFoundError:
            pass
        if proc is not None and proc.poll() is not None:
            return False
        time.sleep(0.1)
    return False


_kvm: tuple[bool, str] | None = None


def kvm_status(qemu: str, cache: Path) -> tuple[bool, str]:
    """(KVM works, why not): /dev/kvm exists and a guest (no NICs) booted
    under it reaches init within ``KVM_PROBE_S``. Probed once per process."""
    global _kvm
    if _kvm is not None:
        return _kvm
    if not os.path.exists("/dev/kvm"):
        _kvm = (False, "/dev/kvm is missing (no KVM on this machine)")
        return _kvm
    with tempfile.TemporaryDirectory(prefix="turnout-kvm-probe.") as d:
        _kvm = _probe(qemu, cache, Path(d) / "serial.log")
    return _kvm


def _probe(qemu: str, cache: Path, serial: Path) -> tuple[bool, str]:
    proc = subprocess.Popen(_qemu_args(qemu, cache, "kvm", serial, ""),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        ok = _wait_for(serial, "TURNOUT_VM_INIT", KVM_PROBE_S, proc)
    finally:
        if proc.poll() is None:
            proc.kill()
        _, err = proc.communicate(timeout=10)
    if ok:
        return (True, "")
    if proc.returncode not in (None, 0, -9):
        return (False, f"/dev/kvm present but QEMU failed under KVM: "
                       f"{err.decode(errors='replace').strip()[-200:]}")
    return (False, f"/dev/kvm present but the guest did not reach init in {KVM_PROBE_S:g} s "
                   "under KVM (nested virtualization?)")


@dataclass
class VmPlan:
    """How this session's guests run: QEMU, the assets, the accelerator."""

    qemu: str
    cache: Path
    accel: str  # kvm | tcg
    why: str  # why this accelerator


def require_vm(qemu_accel: str) -> VmPlan:
    """The plan for a QEMU VNF, or VmUnavailable with the reason (no QEMU,
    no assets, no working KVM and ``qemu_accel`` is not "tcg")."""
    qemu = find_qemu()
    if qemu is None:
        raise VmUnavailable("qemu-system-x86_64 not found (Debian package qemu-system-x86)")
    cache = assets()
    if qemu_accel == "tcg":
        return VmPlan(qemu, cache, "tcg", "qemu_accel = \"tcg\" (functional check: the "
                      "figures measure the emulator, not the switch)")
    ok, why = kvm_status(qemu, cache)
    if not ok:
        raise VmUnavailable(f"QEMU VNF needs KVM: {why}; TCG would measure the emulator, not "
                            "the switch (campaign.qemu_accel = \"tcg\" runs it anyway)")
    return VmPlan(qemu, cache, "kvm", f"KVM reached init within {KVM_PROBE_S:g} s")


#: the counters a bridging guest prints (tests/vm/init, GUEST_STATS)
GUEST_COUNTERS = tuple(f"{n}_{c}" for n in ("eth0", "eth1")
                       for c in ("rx", "tx", "rx_dropped", "tx_dropped"))


def _parse_sample(line: str) -> dict[str, int]:
    """``GUEST_STATS`` and one unsigned count per ``GUEST_COUNTERS``, or {}."""
    v = line.split()
    if not v or v[0] != "GUEST_STATS" or len(v) != len(GUEST_COUNTERS) + 1:
        return {}
    if not all(x.isdigit() for x in v[1:]):
        return {}
    return dict(zip(GUEST_COUNTERS, map(int, v[1:]), strict=True))


@dataclass
class BridgeVm:
    """A running guest bridging its two NICs."""

    proc: subprocess.Popen[bytes]
    serial: Path
    name: str

    def samples(self) -> list[str]:
        """The guest's whole GUEST_STATS lines so far: a line the guest is
        still writing (no newline yet) or one a kernel message cut into on
        the shared console is not a sample."""
        try:
            text = self.serial.read_text(errors="replace")
        except FileNotFoundError:
            return []
        return [ln for ln in text[:text.rfind("\n") + 1].splitlines() if _parse_sample(ln)]

    def stats(self, lines: list[str] | None = None) -> dict[str, Any]:
        """The guest's last NIC counters (``GUEST_COUNTERS``); empty before
        its first sample."""
        lines = self.samples() if lines is None else lines
        return _parse_sample(lines[-1]) if lines else {}

    def stats_after(self, timeout_s: float) -> dict[str, Any]:
        """Counters read wholly after now: the second sample line to appear
        from now on (the first may have been read before), or the last one
        when none comes within ``timeout_s``."""
        n0 = len(self.samples())
        t_end = time.monotonic() + timeout_s
        lines = self.samples()
        while len(lines) < n0 + 2 and time.monotonic() < t_end and self.proc.poll() is None:
            time.sleep(0.05)
            lines = self.samples()
        return self.stats(lines[:n0 + 2])


def start_bridge_vm(tb: Testbed, plan: VmPlan, nics: list[tuple[str, str]], name: str,
                    cpu: int | None = None) -> BridgeVm:
    """Boot a guest whose two virtio-net NICs are the vhost-user sockets in
    ``nics`` ((socket, MAC), served by the SUT) and wait until its bridge is
    up. The process is the testbed's (stopped by PID at its close)."""
    d = tb.directory("vm")
    serial = d / f"{name}.log"
    args = _qemu_args(plan.qemu, plan.cache, plan.accel, serial, "turnout_mode=bridge")
    for i, (sock, mac) in enumerate(nics):
        t_end = time.monotonic() + 10
        while not os.path.exists(sock) and time.monotonic() < t_end:
            time.sleep(0.1)
        if not os.path.exists(sock):
            raise VmError(f"{name}: the SUT's vhost-user socket {sock} did not appear")
        # Under TCG the NICs use INTx (vectors=0): QEMU 7.2 segfaults in
        # vhost_net_start with MSI-X and no KVM irqfds (docs/vhost-user.md)
        dev = f"virtio-net-pci,netdev=n{i},mac={mac}" + (",vectors=0" if plan.accel == "tcg"
                                                          else "")
        args += ["-chardev", f"socket,id=c{i},path={sock}",
                 "-netdev", f"vhost-user,id=n{i},chardev=c{i}", "-device", dev]
    proc = tb.spawn(args, cpus=None if cpu is None else str(cpu), stdout=subprocess.DEVNULL)
    vm = BridgeVm(proc, serial, name)
    if not _wait_for(serial, "TURNOUT_VM_BRIDGE_UP", BRIDGE_UP_S, proc):
        log = serial.read_text(errors="replace")[-400:] if serial.exists() else ""
        err = ""
        if proc.poll() is not None and proc.stderr is not None:
            err = proc.stderr.read().decode(errors="replace").strip()[-300:]
        tb.stop(proc)
        raise VmError(f"{name} ({plan.accel}): the guest's bridge did not come up in "
                      f"{BRIDGE_UP_S:g} s; qemu: {err or 'running'}; console: {log}")
    up = [ln for ln in serial.read_text(errors="replace").splitlines()
          if ln.startswith("TURNOUT_VM_BRIDGE_UP")]
    if not up or up[0].split()[-2:] != ["3", "3"]:
        tb.stop(proc)
        raise VmError(f"{name}: the guest's bridge ports do not forward: {up[:1]} "
                      "(STP port states, 3 = forwarding)")
    return vm


class GuestCounting:
    """A Measurer whose trials also carry the guests' NIC counters over the
    trial (``extra["guests"]``: per guest, ``GUEST_COUNTERS``). The guests
    print their counters about every second (guest time, slower under TCG):
    the trial waits for a sample read wholly after its end (two new lines,
    ``GuestCounting.WAIT_S`` at most: about 2 s per trial)."""

    WAIT_S = 10.0

    def __init__(self, inner: Any, vms: list[BridgeVm]) -> None:
        self.inner, self.vms = inner, vms

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def measure(self, duration_s: float, load_total_pps: float) -> Any:
        for v in self.vms:
            if v.proc.poll() is not None:
                raise VmError(f"{v.name}: QEMU exited ({v.proc.returncode})")
        before = [v.stats() for v in self.vms]  # read before the trial: enough
        counts = self.inner.measure(duration_s, load_total_pps)
        guests = []
        for v, b in zip(self.vms, before, strict=True):
            a = v.stats_after(self.WAIT_S)
            if not a:
                raise VmError(f"{v.name}: the guest printed no NIC counters (GUEST_STATS) "
                              f"within {self.WAIT_S:g} s of the trial's end; console: "
                              f"{v.serial}")
            guests.append({"name": v.name, **{k: a[k] - b.get(k, 0) for k in a}})
        counts.extra["guests"] = guests
        return counts
