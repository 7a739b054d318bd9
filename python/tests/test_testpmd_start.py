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


def _fwd_stats(rx: int) -> str:
    """testpmd 22's answer to ``show fwd stats all`` (two ports, io)."""
    ports = "".join(
        f"\n  ---------------------- Forward statistics for port {p}  ----------------------\n"
        f"  RX-packets: {rx // 2}       RX-dropped: 0             RX-total: {rx // 2}\n"
        f"  TX-packets: {rx // 2}       TX-dropped: 0             TX-total: {rx // 2}\n"
        "  ----------------------------------------------------------------------------\n"
        for p in (0, 1))
    return (ports
            + "\n  +++++++++++++++ Accumulated forward statistics for all ports+++++++++++++++\n"
            f"  RX-packets: {rx}              RX-dropped: 0             RX-total: {rx}\n"
            f"  TX-packets: {rx}              TX-dropped: 0             TX-total: {rx}\n"
            "  ++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++\n")


def test_fwd_stats_give_the_cycles_or_zero_before_the_first_packet() -> None:
    """The cost probe reads testpmd's cycles line; before the first packet
    testpmd prints none, and the probe must not wait its whole deadline for
    it (that wait cost R+ trials their cost samples at the window's start)."""
    from turnout.sut.testpmd import Testpmd

    cycles = ("\n  CPU cycles/packet=40.80 (total cycles=1197284890 / total io packets="
              "29347264) at 2600 MHz Clock\n")
    assert Testpmd.parse_fwd_stats(_fwd_stats(0)) == (0.0, 0)
    assert Testpmd.parse_fwd_stats(_fwd_stats(29347264) + cycles) == (1197284890.0, 29347264)
    # packets counted, the cycles line not written yet: not complete
    assert Testpmd.parse_fwd_stats(_fwd_stats(29347264)) is None
    # the answer cut before its accumulated block closes: not complete
    assert Testpmd.parse_fwd_stats(_fwd_stats(0)[:-90]) is None
    assert Testpmd.parse_fwd_stats("testpmd> ") is None
