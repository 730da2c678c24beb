"""The compose deployment (docker-compose.yml, Dockerfile, docs/deployment.md) proves
senders with MUNGE as the default ingest mode requires: checked without a Docker engine
(none runs here). The compose file is read as YAML: a `munge` service with the cluster's
key as a secret, its socket shared with every stacklens service at the path they are told,
the login settings required; the Dockerfile installs MUNGE and names the same socket; and
the `munge` service's script runs here as it would in the container, starting a munged
that the collector's own MUNGE code (stacklens.munge) encodes and decodes through.
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from stacklens import munge
from stacklens.paths import SOURCE_ROOT
from stacklens.settings_table import DECLARED

COMPOSE = yaml.safe_load((SOURCE_ROOT / "docker-compose.yml").read_text())
DOCKERFILE = (SOURCE_ROOT / "Dockerfile").read_text()
SCRIPT = SOURCE_ROOT / "scripts" / "docker-munged.sh"
SOCKET = "/run/munge/munge.socket.2"
#: The services that run a collector, and so need the munged socket.
COLLECTORS = ("stacklens", "stacklens-citus")


def _environment(service: str) -> dict[str, str]:
    return COMPOSE["services"][service]["environment"]


def test_the_munge_service_runs_the_script_with_the_key_as_a_secret():
    service = COMPOSE["services"]["munge"]
    assert service["build"] == "."
    assert service["command"] == ["/opt/stacklens/scripts/docker-munged.sh"]
    assert service["secrets"] == ["munge_key"]
    assert COMPOSE["secrets"]["munge_key"] == {"file": "${MUNGE_KEY_FILE:-./secrets/munge.key}"}
    assert service["volumes"] == ["munge-socket:/run/munge"]
    assert "munge-socket" in COMPOSE["volumes"]
    check = " ".join(service["healthcheck"]["test"])
    assert f"munge -n -S {SOCKET} | unmunge -S {SOCKET}" in check
    assert os.access(SCRIPT, os.X_OK)


@pytest.mark.parametrize("name", COLLECTORS)
def test_every_collector_shares_the_munged_socket_and_waits_for_it(name):
    service = COMPOSE["services"][name]
    env = _environment(name)
    assert env["STACKLENS_INGEST_AUTH"] == "${STACKLENS_INGEST_AUTH:-proven}"
    assert env["STACKLENS_MUNGE_SOCKET"] == SOCKET
    assert "munge-socket:/run/munge" in service["volumes"]
    assert service["depends_on"]["munge"] == {"condition": "service_healthy"}


def test_the_server_requires_a_login_mode_and_its_host_names():
    env = _environment("stacklens")
    assert env["STACKLENS_AUTH_MODE"].startswith("${STACKLENS_AUTH_MODE:?")
    assert env["STACKLENS_HTTP_ALLOWED_HOSTS"].startswith("${STACKLENS_HTTP_ALLOWED_HOSTS:?")


def test_every_setting_the_deployment_names_is_declared():
    named = set(re.findall(r"\bSTACKLENS_[A-Z0-9_]+", DOCKERFILE))
    for service in COMPOSE["services"].values():
        named |= {k for k in service.get("environment", {}) if k.startswith("STACKLENS_")}
    assert named - set(DECLARED) == set()
    assert len(named) >= 15


def test_the_image_installs_munge_and_names_the_shared_socket():
    packages = re.search(r"apt-get install -y -q \\\n(.*?)&& rm", DOCKERFILE, re.S)
    assert packages is not None
    assert {"munge", "libmunge2"} <= set(packages.group(1).replace("\\", " ").split())
    env = dict(re.findall(r"(STACKLENS_\w+)=(\S+)", DOCKERFILE))
    assert env["STACKLENS_INGEST_AUTH"] == "proven"
    assert env["STACKLENS_MUNGE_SOCKET"] == SOCKET
    assert env["STACKLENS_COLLECTOR_SOCKET"] == "off"
    assert "COPY . ." in DOCKERFILE  # the script is in the image at /opt/stacklens/scripts


@pytest.fixture
def secret_dir() -> Iterator[Path]:
    """A directory as the container sees it: the secret, the socket and state folders."""
    path = Path(tempfile.mkdtemp(prefix="stacklens-deploy-", dir="/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _run_script(root: Path, key: Path) -> subprocess.Popen:
    env = {**os.environ, "MUNGE_KEY_SECRET": str(key), "MUNGE_SOCKET_DIR": str(root / "run"),
           "MUNGE_STATE_DIR": str(root / "state")}  # fmt: skip
    return subprocess.Popen([str(SCRIPT)], env=env, stderr=subprocess.PIPE, text=True)


def test_the_munge_script_starts_a_munged_the_collector_can_use(secret_dir):
    # The secret as compose mounts it: the host file's owner and mode (here: nobody, 0644),
    # which munged would refuse as its key.
    key = secret_dir / "munge_key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o644)
    nobody = pwd.getpwnam("nobody")
    os.chown(key, nobody.pw_uid, nobody.pw_gid)
    daemon = _run_script(secret_dir, key)
    sock = secret_dir / "run" / "munge.socket.2"
    try:
        deadline = time.monotonic() + 30
        while not sock.exists():
            assert daemon.poll() is None, daemon.communicate()[1]
            assert time.monotonic() < deadline, "munged did not start"
            time.sleep(0.05)
        copied = secret_dir / "state" / "munge.key"
        assert copied.read_bytes() == key.read_bytes()
        assert copied.stat().st_uid == pwd.getpwnam("munge").pw_uid
        assert copied.stat().st_mode & 0o777 == 0o400
        assert (secret_dir / "run").stat().st_mode & 0o777 == 0o755
        credential = munge.encode(b"compose", str(sock))
        decoded = munge.decode(credential, str(sock))
        assert (decoded.uid, decoded.payload) == (os.getuid(), b"compose")
    finally:
        daemon.terminate()
        daemon.wait(timeout=30)
    assert daemon.returncode == 0, daemon.stderr.read() if daemon.stderr else ""


def test_the_munge_script_refuses_to_start_without_a_key(secret_dir):
    daemon = _run_script(secret_dir, secret_dir / "absent")
    _, stderr = daemon.communicate(timeout=30)
    assert daemon.returncode == 1
    assert stderr.startswith(f"munged: no MUNGE key at {secret_dir / 'absent'}: give the ")
