"""testpmd's start-up failure says whether it exited or is still starting,
and what it said after EAL's banner (the bench's "Not measured" reason)."""

from turnout.sut.testpmd import start_failure

BANNER = ("EAL: Detected CPU lcores: 2\nEAL: Detected NUMA nodes: 1\n"
          "EAL: Detected shared linkage of DPDK\n"
          "EAL: Multi-process socket /var/run/dpdk/x/mp_socket\n"
          "EAL: Selected IOVA mode 'PA'\n")


def test_still_starting_says_the_wait_and_not_the_banner() -> None:
    why = start_failure(BANNER, None, 60.2)
    assert why.startswith("testpmd did not start forwarding within 60 s (still starting")
    assert "nothing after EAL's banner" in why
    assert "lcores" not in why and "\n" not in why


def test_an_exit_says_its_status_and_last_lines() -> None:
    log = BANNER + "VHOST_CONFIG: (/s) vhost-user server: socket created\n" \
        "EAL: Error - exiting with code: 1\n  Cause: No probed ethernet devices\n"
    why = start_failure(log, 1, 0.7)
    assert why.startswith("testpmd exited with status 1 before forwarding: ")
    assert why.endswith("EAL: Error - exiting with code: 1 | Cause: No probed ethernet devices")
    assert "\n" not in why
