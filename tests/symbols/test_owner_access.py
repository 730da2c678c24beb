# tests/symbols/test_owner_access.py — whose permissions a module file is read with (issue #26).
"""stacklens/symbols.owner_access against the kernel's own verdict: a test user (its own
group, from the system's group database) and a tree of directories and files with every
case the walk decides (a directory it cannot search, one it may search but not list, a
file of its group, a file it owns without the owner's read bit, symlinks into and out of
places it cannot reach, a symlink loop, a relative path): the walk says readable exactly
where the user itself can read the file (os.access run as that user), and the reason of
every file it may not read is the one neutral sentence, the same whether the file exists
or not. Resolver.resolve with that owner never reads a file the walk refused (no build-id
read), and reads one it may."""

from __future__ import annotations

import grp
import os
import pwd
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from stacklens.symbols import MODULE_OFFSET, NOT_READABLE, Owner, Resolver, owner_access
from tests.identity.daemons import as_user, unix_user

#: Each case: path under the tree -> the walk's reason for the test user ("" = readable).
CASES = {
    "private/file": NOT_READABLE,  # a directory the user cannot search
    "private/missing": NOT_READABLE,  # the same sentence when nothing is there
    "private/sub/missing": NOT_READABLE,
    "search/file": "",  # search permission without read permission on the directory
    "search/closed": NOT_READABLE,  # 0600 root's
    "search/missing": "{path} is not here",  # the user can see that itself
    "search": "{path} is not a regular file",
    "group/file": "",  # by the user's group (0750 directory, 0640 file)
    "mine": NOT_READABLE,  # the user's own file, 0044: the owner class decides
    "into-private": NOT_READABLE,  # a symlink the user may follow, into private/
    "into-private-missing": NOT_READABLE,
    "to-search-file": "",  # a relative symlink to search/file
    "private/out": NOT_READABLE,  # a symlink inside private/ to a readable file
    "loop": NOT_READABLE,  # a symlink to itself (ELOOP)
    "search/../group/file": "",
}


@pytest.fixture(scope="module")
def tree() -> Iterator[tuple[Path, Owner]]:
    """The tree (under /tmp, every parent searchable by all) and the test user as Owner."""
    with unix_user("o") as user:
        root = Path(tempfile.mkdtemp(prefix="stacklens-owner-", dir="/tmp"))
        try:
            root.chmod(0o755)
            gid = grp.getgrgid(user.pw_gid).gr_gid
            for name, mode, group in (("private", 0o700, 0), ("private/sub", 0o755, 0),
                                      ("search", 0o711, 0), ("group", 0o750, gid)):  # fmt: skip
                (root / name).mkdir()
                os.chown(root / name, 0, group)
                (root / name).chmod(mode)
            for name, mode, uid, group in (("private/file", 0o644, 0, 0),
                                           ("search/file", 0o644, 0, 0),
                                           ("search/closed", 0o600, 0, 0),
                                           ("group/file", 0o640, 0, gid),
                                           ("mine", 0o044, user.pw_uid, gid)):  # fmt: skip
                (root / name).write_bytes(b"\x7fELF not really")
                os.chown(root / name, uid, group)
                (root / name).chmod(mode)
            (root / "into-private").symlink_to(root / "private" / "file")
            (root / "into-private-missing").symlink_to(root / "private" / "missing")
            (root / "to-search-file").symlink_to("search/file")
            (root / "private" / "out").symlink_to(root / "search" / "file")
            (root / "loop").symlink_to(root / "loop")
            yield root, Owner.of(user.pw_uid)
        finally:
            subprocess.run(["rm", "-rf", str(root)], check=True)


def kernel_says(user: str, paths: list[str]) -> list[bool]:
    """os.access(path, R_OK) for each path, run as `user` (its uid, gid and groups)."""
    script = "import os, sys; print(*(int(os.access(p, os.R_OK)) for p in sys.argv[1:]))"
    out = subprocess.run([*as_user(user), "/usr/bin/python3", "-c", script, *paths],
                         check=True, capture_output=True, text=True).stdout  # fmt: skip
    return [s == "1" for s in out.split()]


def test_the_walk_agrees_with_the_kernel(tree: tuple[Path, Owner]) -> None:
    root, owner = tree
    assert owner.groups == frozenset({os.stat(root / "group").st_gid})
    paths = [str(root / name) for name in CASES]
    got = {name: owner_access(p, owner).reason for name, p in zip(CASES, paths, strict=True)}
    assert got == {name: why.format(path=p) for (name, why), p in
                   zip(CASES.items(), paths, strict=True)}  # fmt: skip
    user = pwd.getpwuid(owner.uid).pw_name
    assert kernel_says(user, paths) == [why == "" for why in CASES.values()]
    # the file reached, every symlink resolved, and its status
    found = owner_access(str(root / "to-search-file"), owner)
    assert (found.real, found.status and found.status.st_ino) == (
        str(root / "search" / "file"),
        os.stat(root / "search" / "file").st_ino,
    )
    assert owner_access("private/file", owner).reason == NOT_READABLE.format(path="private/file")
    # uid 0 may read all
    assert owner_access(str(root / "private" / "file"), Owner(0, frozenset())).reason == ""


def test_the_resolver_reads_only_what_the_owner_may(tree: tuple[Path, Owner]) -> None:
    root, owner = tree
    resolver = Resolver()
    for name in ("private/file", "private/missing", "into-private", "search/closed"):
        path = str(root / name)
        (site,) = resolver.resolve(path, "ab" * 20, [0x10], owner)
        assert (site.quality, site.reason) == (MODULE_OFFSET, NOT_READABLE.format(path=path))
    assert resolver.stats.build_id_reads == 0  # not one of them was opened
    # a file it may read is read (here: not an ELF file, and it says so)
    (site,) = resolver.resolve(str(root / "search" / "file"), "ab" * 20, [0x10], owner)
    assert site.reason.startswith(f"{root}/search/file could not be read as ELF (")
    # root's job is read as before: the same private file, its own reason
    (site,) = resolver.resolve(str(root / "private" / "file"), "ab" * 20, [0x10],
                               Owner(0, frozenset()))  # fmt: skip
    assert site.reason.startswith(f"{root}/private/file could not be read as ELF (")
