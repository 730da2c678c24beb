"""The identity tests' shared fixtures: a directory every test user can reach, a munged of
the tests' own, and two Unix users (each per module, removed afterwards)."""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.identity.daemons import munged, unix_user


@pytest.fixture(scope="module")
def shared_dir() -> Iterator[Path]:
    """A directory every test user can reach (sockets, spools), removed afterwards."""
    path = Path(tempfile.mkdtemp(prefix="stacklens-identity-", dir="/tmp"))
    path.chmod(0o755)
    yield path
    subprocess.run(["rm", "-rf", str(path)], check=True)


@pytest.fixture(scope="module")
def munge_socket(shared_dir: Path) -> Iterator[str]:
    with munged(shared_dir) as sock:
        yield sock


@pytest.fixture(scope="module")
def users() -> Iterator[tuple]:
    with unix_user("a") as a, unix_user("b") as b:
        yield a, b
