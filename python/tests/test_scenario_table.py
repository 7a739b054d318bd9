"""The scenario table (turnout/scenarios/table.py) and the report's sections
table (turnout/report/sections.py): every scenario is listed once, builds
from its family's plan, and names a section the page has; the page is made
of the table's sections in the table's order."""

from __future__ import annotations

from pathlib import Path

import pytest

from synth_db import default_like
from test_vhost_scenario import ROLES, FakeTestbed
from turnout.report.points import load_campaign
from turnout.report.sections import SECTIONS, all_sections, section_keys
from turnout.results import ResultsDB
from turnout.scenarios import (
    SCENARIO_ORDER,
    SCENARIOS,
    TABLE,
    Point,
    Unsupported,
    build,
    cell_port,
    check,
    scenario_rank,
)
from turnout.sut import make_sut

#: a point of each scenario that turnoutd can run (built on a fake testbed)
POINTS = {
    "p2p": Point("p2p"), "p2v": Point("p2v"), "v2p": Point("v2p"), "v2v": Point("v2v"),
    "loopback": Point("loopback", vnfs=2), "nvsn": Point("nvsn", pairs=3),
    "density": Point("density", ports=5), "rtt": Point("rtt"),
    "rule_update": Point("rule_update"), "overlay": Point("overlay"),
    "openflow": Point("openflow", rules=10, masks=2, outputs=3),
}


def test_every_scenario_is_in_the_table_once_and_in_the_test_above() -> None:
    assert len(SCENARIOS) == len(set(SCENARIOS)) == len(TABLE)
    assert set(POINTS) == set(SCENARIOS)


def test_every_scenario_names_a_section_of_the_page() -> None:
    keys = section_keys()
    assert len(keys) == len(set(keys)), "a section key twice"
    for sc in TABLE:
        assert sc.section in keys, f"{sc.name}: no section {sc.section!r}"


def test_report_order_comes_from_the_table() -> None:
    ranked = [sc for sc in TABLE if sc.order is not None]
    assert [sc.order for sc in ranked] == sorted(sc.order for sc in ranked if sc.order is not None)
    assert tuple(sc.name for sc in ranked) == SCENARIO_ORDER
    # the unranked ones, and stored names the table does not know (an
    # openflow rule set, an older database's), follow by name
    unranked = sorted(["rtt", "openflow/r10/m2/o3", "overlay", "zz-old", "chain"],
                      key=scenario_rank)
    assert unranked == ["chain", "openflow/r10/m2/o3", "overlay", "rtt", "zz-old"]
    assert scenario_rank("p2p") < scenario_rank("density") < scenario_rank("chain")


@pytest.mark.parametrize("name", [sc.name for sc in TABLE if sc.wire is not None])
def test_each_family_builds_its_scenario(tmp_path: Path, name: str) -> None:
    sut = make_sut("turnoutd", None)
    point = POINTS[name]
    built = build(FakeTestbed(tmp_path), sut, point, memif_tester=True, tester_roles=ROLES)
    topo = built.topology
    names = {p.name for p in topo.ports}
    assert built.streams, "no traffic"
    assert all(a in names and b in names for a, b in topo.xconnects)
    # the cell's port is the one build used (memif: turnoutd has it)
    assert built.virtual_port == cell_port(point, "memif", sut)
    assert (built.update is not None) == (name == "rule_update")
    assert (topo.openflow is not None) == (name == "openflow")
    idle = [p for p in topo.ports if p.idle]
    assert len(idle) == (point.ports - 2 if name == "density" else 0)
    if name == "openflow":
        assert len(built.helpers) == 0 and {"m1", "m2"} <= names


def test_overlay_is_checked_here_and_built_elsewhere(tmp_path: Path) -> None:
    sut = make_sut("turnoutd", None)
    check(POINTS["overlay"], sut, ROLES)
    with pytest.raises(Unsupported, match=r"turnout\.overlay"):
        build(FakeTestbed(tmp_path), sut, POINTS["overlay"], memif_tester=True,
              tester_roles=ROLES)


def test_a_family_check_refuses_what_it_cannot_run() -> None:
    wire = make_sut("wire", None)
    with pytest.raises(Unsupported, match="no meaning without a switch"):
        check(POINTS["density"], wire, ROLES)
    with pytest.raises(Unsupported, match="reflect role"):
        check(POINTS["rtt"], make_sut("turnoutd", None), ROLES - {"reflect"})
    with pytest.raises(Unsupported, match="unknown scenario"):
        check(Point("p3p"), wire, ROLES)


def test_the_page_is_the_sections_table_in_order(tmp_path: Path) -> None:
    with ResultsDB(tmp_path / "r.db") as db:
        default_like(db)
        sections = all_sections(load_campaign(db, None))
    assert [s.key for s in sections] == section_keys()
    assert len(SECTIONS) < len(sections)  # one row makes two (nvsn, density)


def test_the_report_files_each_scenarios_points_under_its_tables_section(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The loopback and scale sections show the points of the scenarios the
    table gives them, not scenarios picked by name: a scenario moved to
    another section in the table moves there on the page."""
    from dataclasses import replace

    from turnout.report.loopback import loopback_section
    from turnout.report.points import in_section, throughput_points
    from turnout.report.scale import scale_sections
    from turnout.scenarios.table import BY_NAME, section_of

    assert section_of("openflow/r100/m8/o2") == "openflow" and section_of("zz-old") == ""
    with ResultsDB(tmp_path / "r.db") as db:
        default_like(db)
        data = load_campaign(db, None)
        points = throughput_points(data)
        assert {p.key.scenario for p in in_section(points, "loopback")} == {"loopback"}
        assert {p.key.scenario for p in in_section(points, "nvsn")} == {"nvsn"}
        # NvsN's row says density: its figure moves from one section to the other
        monkeypatch.setitem(BY_NAME, "nvsn", replace(BY_NAME["nvsn"], section="density"))
        nvsn, density = scale_sections(data, points)
        assert not nvsn.figures and "density-nvsn-uni" in [f.key for f in density.figures]
        # loopback's row says throughput: the loopback section has none
        monkeypatch.setitem(BY_NAME, "loopback", replace(BY_NAME["loopback"],
                                                         section="throughput"))
        assert not loopback_section(data, points).figures
