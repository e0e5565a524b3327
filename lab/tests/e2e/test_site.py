"""site.yml on the lab after converging: check mode reports no change. (That a second real converge
changes nothing is checked by test_cli, on the run it watches in a real terminal.)"""

import gpufleet_lab as lab

from gpufleet import runner


def test_check_mode_after_converge_reports_no_change(converged):
    check = runner.run_playbook("site.yml", lab.LAB_INVENTORY.parent, check=True, quiet=True)
    assert check.ok
    assert sum(counts.get("changed", 0) for counts in check.hosts.values()) == 0
