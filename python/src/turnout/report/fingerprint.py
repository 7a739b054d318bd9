"""The "Host and SUT configuration" section: the fairness check, the host
fingerprints and every SUT's version and configuration."""

from __future__ import annotations

from .model import Section, Table, slug
from .points import CampaignData

__all__ = ["fingerprint_section"]


def fingerprint_section(data: CampaignData) -> Section:
    """Host fingerprint(s) and every SUT's version and configuration."""
    import json

    from .setup import fairness_table

    sec = Section(
        key="setup", title="Host and SUT configuration",
        intro="First the check that nothing in the set-up favours one SUT: per verdict cell, "
              "the same tester build, the same tester processes, ports and buffers, the same "
              "chain VNFs and the same placement (the SUT's data path on its CPUs, its other "
              "threads off them) for every SUT. Then the host fingerprint stored with the "
              "results (CPU, kernel, frequency governor, turbo, SMT, THP, git commit, tool "
              "versions, CPU pinning of every process) and the version and configuration of "
              "every SUT measured.",
    )
    fair = fairness_table(data)
    if fair.rows:
        sec.tables.append(fair)
    host_ids = {data.campaign.host_id} | {r.host_id for r in data.results} | \
        {t.host_id for t in data.trials}
    for hid in sorted(h for h in host_ids if h is not None):
        h = data.db.host(hid)
        if h is None:
            continue
        t = Table(key=slug("host", hid), title=f"Host {h.hostname or hid}",
                  columns=["field", "value"], mono=[1])
        for k, v in (("hostname", h.hostname), ("CPU", h.cpu_model), ("cores", str(h.cores)),
                     ("kernel", h.kernel), ("governor", h.governor), ("turbo", h.turbo),
                     ("SMT", h.smt), ("THP", h.thp), ("git commit", h.git_commit),
                     ("tools", json.dumps(h.tools, indent=1, sort_keys=True)),
                     ("pinning", json.dumps(h.pinning, indent=1, sort_keys=True)),
                     ("other", json.dumps(h.extra, indent=1, sort_keys=True, default=str))):
            t.rows.append([k, v or "–"])
            t.flags.append("")
        sec.tables.append(t)
    from .hosts import remote_host_tables  # a remote campaign's hosts (turnout.hosts)

    sec.tables.extend(remote_host_tables(data))
    suts = data.db.suts(data.campaign.id)
    st = Table(key="suts", title="SUTs", columns=["SUT", "version", "configuration"], mono=[2])
    for s in suts:
        st.rows.append([s.name, s.version or "–",
                        json.dumps(s.config, indent=1, sort_keys=True, default=str)])
        st.flags.append("")
    sec.tables.append(st)
    if not sec.has_data():
        sec.empty = "No host fingerprint or SUT configuration stored with this campaign."
    return sec
