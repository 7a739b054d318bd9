"""Host checks and fingerprint."""

from .checks import CHECKS, Check, Finding, run_checks
from .fingerprint import fingerprint, git_commit, process_pinning

__all__ = ["CHECKS", "Check", "Finding", "fingerprint", "git_commit", "process_pinning",
           "run_checks"]
