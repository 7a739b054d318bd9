"""osken_suite.parse on tester logs as the suite writes them: each test's
outcome under its file, the error's reason, and the progress dots of a
throughput test's sender, which can land at the start of the next line
(a test line or a file line) when a send tick prints after the line break."""

from __future__ import annotations

from osken_suite import parse

FILES = {"meter: 01_DROP", "meter: 02_REMARK"}


def test_dots_before_a_result_or_a_file_line_lose_no_test() -> None:
    log = "\n".join([
        "meter: 01_DROP",
        "..........",
        "    2Mbps(ethernet/ipv4/tcp)-->'in_port=1,actions=meter:1Mbps(drop),output:2'   OK",
        "..........",
        ".    2Mbps(ethernet/arp)-->'in_port=1,actions=meter:1Mbps(drop),output:2'   ERROR",
        "        Received unexpected throughput: {'in_port': 2} 880.01kbps",
        ".meter: 02_REMARK",
        "..........",
        ".    200pktps(ethernet/ipv4/tcp)-->'in_port=1,actions=meter:100pktps(drop),output:2' OK",
        "OK(2) / ERROR(1)",
    ])
    out, finished = parse(log, FILES)
    assert finished
    assert out == {
        ("meter: 01_DROP", 0): None,
        ("meter: 01_DROP", 1): "Received unexpected throughput: {'in_port': 2} 880.01kbps",
        ("meter: 02_REMARK", 0): None,
    }
