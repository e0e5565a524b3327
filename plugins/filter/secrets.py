# SPDX-License-Identifier: Apache-2.0
"""bcrypt_hash: a password's bcrypt hash for a Prometheus web configuration's basic_auth_users.

bcrypt salts each hash at random, so a fresh hash every run would rewrite the file every run:
the hash already there is kept whenever it still matches the password."""

from __future__ import annotations

import warnings
from typing import Any

from ansible.errors import AnsibleFilterError

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import crypt  # Python 3.11's, on glibc's libxcrypt (bcrypt included); no third-party hashing package needed


def bcrypt_hash(password: str, previous: str | None = "") -> str:
    if not password:
        raise AnsibleFilterError("bcrypt_hash: the password is empty")
    if previous and previous.startswith("$2") and crypt.crypt(password, previous) == previous:
        return previous
    hashed = crypt.crypt(password, crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=1 << 10))
    if not hashed or not hashed.startswith("$2"):
        raise AnsibleFilterError("bcrypt_hash: this controller's crypt library has no bcrypt")
    return hashed


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"bcrypt_hash": bcrypt_hash}
