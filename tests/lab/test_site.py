"""site.yml on the lab: converges, then changes nothing, in real and check mode."""

from gpufleet import lab, runner


def test_second_converge_changes_nothing(converged):
    again = runner.run_playbook(lab.PLAYBOOK, lab.LAB_INVENTORY.parent, quiet=True)
    assert again.ok
    # m1 and gpu1 over SSH, localhost for the cluster roles applied through the lab API.
    changed = {host: counts.get("changed", 0) for host, counts in again.hosts.items()}
    assert changed == {"m1": 0, "gpu1": 0, "localhost": 0}


def test_check_mode_after_converge_reports_no_change(converged):
    check = runner.run_playbook(lab.PLAYBOOK, lab.LAB_INVENTORY.parent, check=True, quiet=True)
    assert check.ok
    assert sum(counts.get("changed", 0) for counts in check.hosts.values()) == 0
