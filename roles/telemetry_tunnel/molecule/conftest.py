"""Fixtures shared by this role's scenarios: both check what the tunnel host serves."""

import pytest


@pytest.fixture
def bind(host):
    """The tunnel host's own address, where the forwarded ports listen."""
    return host.check_output("hostname -I").split()[0]


@pytest.fixture
def fetch(host):
    """GET a URL from the tunnel host, as Prometheus there would."""

    def get(url):
        return host.run(
            f"python3 -c \"import urllib.request; print(urllib.request.urlopen('{url}', timeout=5).read().decode())\""
        )

    return get
