"""The canary's benchmark gate against a real server (the CALIBRATION SERVER, the benchmark's own stand-in
for vLLM): its exit status is its verdict, and its last line of output says what it measured.

With the timing tests, alone on the machine: the gate refuses to judge a level whose client fell
behind (client-bound), and beside the lab's suites it did so (CI stop 49's run, ci49)."""

import json

from gpufleet.lib.llm_bench import gate

from gpufleet import calibration_server


def test_its_exit_status_is_the_verdict(capsys):
    process, url = calibration_server.launch(0, "--ttft", "0.05", "--itl", "0.005")
    try:
        base = ["--url", url, "--model", "calibration", "--streams", "2", "--warmup", "0.5", "--duration", "2",
                "--max-tokens", "8", "--input-len", "5:10"]  # fmt: skip
        assert gate.main([*base, "--ttft-p99", "5"]) == 0
        met = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        assert met["missed"] == [] and met["requests"] > 0 and 0.05 <= met["ttft_p99_s"] < 5, met
        assert gate.main([*base, "--ttft-p99", "0.01"]) == 1
        missed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["missed"]
        assert missed and missed[0].startswith("ttft_p99_s "), missed
    finally:
        process.terminate()
        process.wait()
    # Nothing answers there: no verdict (2), or a level that judges nothing (1); never a pass.
    assert gate.main(["--url", url, "--model", "m", "--streams", "1", "--duration", "1", "--fixed-length", "off"]) != 0
