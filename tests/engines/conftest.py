"""The real engines the benchmark is tested against, and AIPerf, each from scripts/setup-engines.sh
(`make engines`): `engine` is transformers serve on CPU, shared by the session's tests (its warm-up
takes tens of seconds on two cores)."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from pathlib import Path
from typing import NamedTuple

import httpx
import pytest

REPO = Path(__file__).resolve().parents[2]
ENGINES = REPO / ".cache/engines"
ENGINE = ENGINES / "transformers-serve/bin"
AIPERF = ENGINES / "aiperf/bin/aiperf"
MAKE_MODEL = REPO / "tests/fixtures/engines/make_random_model.py"


def installed(executable: Path) -> Path:
    """The virtualenv's executable; where it is missing the test is skipped, except in CI, where it fails."""
    if not executable.exists():
        if os.environ.get("CI") == "true":
            pytest.fail(f"no {executable.relative_to(ENGINES)}: scripts/setup-engines.sh did not make it")
        pytest.skip(f"no {executable.relative_to(ENGINES)}: run scripts/setup-engines.sh")
    return executable


class Engine(NamedTuple):
    url: str
    model: str
    pid: int


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def engine(tmp_path_factory):
    """transformers serve on CPU with the tiny model: its URL, the model's path (which is its name) and its
    process id."""
    installed(ENGINE / "transformers")
    model = tmp_path_factory.mktemp("tiny-qwen2")
    subprocess.run([str(ENGINE / "python"), str(MAKE_MODEL), str(model), "--shape", "tiny"], check=True,
                   capture_output=True)  # fmt: skip
    port = free_port()
    log = (tmp_path_factory.mktemp("engine") / "serve.log").open("w")
    # One compute thread: pinned to one core for the AIPerf comparison, a second thread would spin against it.
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    server = subprocess.Popen(
        # Its KV cache takes a share of the machine's memory (on CPU: 14 GiB of this 24 GiB machine, beside the
        # lab's other work in `make test`); a tiny model at four streams needs a sliver of that.
        [str(ENGINE / "transformers"), "serve", "--continuous-batching", "--cb-max-memory-percent", "0.04",
         "--device", "cpu", "--host", "127.0.0.1", "--port", str(port), str(model)],
        stdout=log, stderr=subprocess.STDOUT, env=env,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(1)
        else:
            pytest.fail(f"transformers serve did not answer /health: {Path(log.name).read_text()[-2000:]}")
        # The first generation warms the engine up (tens of seconds on two cores): not in any figure.
        body = {"model": str(model), "messages": [{"role": "user", "content": "warm up"}], "max_tokens": 4}
        httpx.post(f"{url}/v1/chat/completions", json=body, timeout=180).raise_for_status()
        yield Engine(url, str(model), server.pid)
    finally:
        server.terminate()
        server.wait(timeout=30)


@pytest.fixture(scope="session")
def aiperf() -> Path:
    """AIPerf's command."""
    return installed(AIPERF)
