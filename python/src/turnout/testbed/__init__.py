"""Testbed: namespaces, veth wires, memif dirs, processes, all torn down."""

from .state import RunState, cleanup_stale, state_dir
from .testbed import Testbed, TestbedError, Veth, is_root

__all__ = ["RunState", "Testbed", "TestbedError", "Veth", "cleanup_stale", "is_root", "state_dir"]
