"""Every SQLite file hubsync keeps is opened as a private regular file, on real files: a
symbolic link in the place of the file, a sidecar or a backup is refused by name and nothing is
written where it points; a mode open to others is tightened (and said, with the real mode), or
refused when this user may not change it."""

from __future__ import annotations

import logging
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from hubsync.core.errors import UnsafeFileError
from hubsync.core.private_files import exposure, modes_left_alone, secure_existing_files
from hubsync.core.sqlite import Database, backup_path
from hubsync.processes import child_environment


def mode(path: Path) -> int:
    return path.lstat().st_mode & 0o777


def made_database(path: Path) -> Path:
    with Database(path) as db:
        db.write(lambda c: c.execute("CREATE TABLE t (x)"))
    return path


def test_a_dangling_link_in_the_files_place_is_refused_and_nothing_is_made_where_it_points(
    tmp_path: Path,
) -> None:
    outside = tmp_path / "elsewhere" / "key.sqlite"
    outside.parent.mkdir()
    path = tmp_path / "state" / "registry.sqlite"
    path.parent.mkdir()
    path.symlink_to(outside)

    for create in (True, False):
        with pytest.raises(UnsafeFileError) as refused:
            Database(path, create=create)
        assert str(refused.value).startswith(f"{path} is a symbolic link (to {outside})")
    assert os.listdir(outside.parent) == [] and os.listdir(path.parent) == ["registry.sqlite"]


def test_a_link_to_a_real_database_is_refused_and_the_database_left_as_it_was(
    tmp_path: Path,
) -> None:
    real = made_database(tmp_path / "real.sqlite")
    before = real.read_bytes()
    path = tmp_path / "hub.db"
    path.symlink_to(real)
    with pytest.raises(UnsafeFileError, match="never through a link"):
        Database(path)
    assert real.read_bytes() == before


@pytest.mark.parametrize("sidecar", ["-wal", "-shm", "-journal", ".v1.bak"])
def test_a_link_in_the_place_of_a_sidecar_or_backup_is_refused_naming_it(
    tmp_path: Path, sidecar: str
) -> None:
    path = made_database(tmp_path / "store.sqlite")
    target = tmp_path / "outside"
    linked = path.with_name(path.name + sidecar)
    if sidecar == ".v1.bak":
        assert linked == backup_path(path, 1)
    linked.unlink(missing_ok=True)
    linked.symlink_to(target)
    with pytest.raises(UnsafeFileError) as refused:
        Database(path)
    assert str(refused.value).startswith(f"{linked} is a symbolic link (to {target})")
    assert not target.exists()


def test_a_file_open_to_others_is_tightened_and_the_real_modes_are_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = made_database(tmp_path / "registry.sqlite")
    path.chmod(0o644)
    backup = backup_path(path, 1)
    backup.write_bytes(b"")
    backup.chmod(0o444)  # read-only for its owner stays so: only group and others lose bits
    with caplog.at_level(logging.WARNING), Database(path):
        pass
    assert (mode(path), mode(backup)) == (0o600, 0o400)
    said = [r.getMessage() for r in caplog.records if "tightened" in r.getMessage()]
    assert said == [
        f"{path} was mode 0644 (group or others could read it); tightened it to 0600",
        f"{backup} was mode 0444 (group or others could read it); tightened it to 0400",
    ]


def test_within_modes_left_alone_a_wide_mode_is_kept_and_a_link_still_refused(
    tmp_path: Path,
) -> None:
    path = made_database(tmp_path / "registry.sqlite")
    path.chmod(0o640)
    with modes_left_alone():
        with Database(path, create=False):
            pass
        assert mode(path) == 0o640
        found = exposure(path)
        assert found is not None and str(found) == f"{path} is mode 0640"
        link = tmp_path / "link.sqlite"
        link.symlink_to(path)
        with pytest.raises(UnsafeFileError):
            Database(link, create=False)
    assert exposure(tmp_path / "missing") is None


def test_a_directory_in_the_files_place_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite"
    (path.with_name(path.name + "-wal")).mkdir()
    with pytest.raises(UnsafeFileError, match="is not a regular file"):
        Database(path)


def _unprivileged_user() -> pwd.struct_passwd | None:
    try:
        return pwd.getpwnam("nobody")
    except KeyError:
        return None


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run a child as another user")
def test_another_users_file_open_to_others_is_refused_with_its_real_mode() -> None:
    nobody = _unprivileged_user()
    setpriv = shutil.which("setpriv")
    if nobody is None or setpriv is None:
        pytest.skip("no user nobody or no setpriv")
    with tempfile.TemporaryDirectory() as shared:  # pytest's own tmp dirs are root's alone
        Path(shared).chmod(0o755)
        _refused_to_nobody(Path(shared) / "registry.sqlite", nobody, setpriv)


def _refused_to_nobody(path: Path, nobody: pwd.struct_passwd, setpriv: str) -> None:
    path.write_bytes(b"")
    path.chmod(0o644)  # root's, open to others: nobody can read it but not tighten it
    checkout = Path(__file__).resolve().parents[2]
    code = (
        "import sys; from pathlib import Path\n"
        "from hubsync.core.errors import UnsafeFileError\n"
        "from hubsync.core.private_files import secure_existing_files\n"
        "try:\n"
        f"    secure_existing_files([Path({str(path)!r})])\n"
        "except UnsafeFileError as exc:\n"
        "    print(exc); sys.exit(3)\n"
    )
    result = subprocess.run(
        [setpriv, f"--reuid={nobody.pw_uid}", f"--regid={nobody.pw_gid}", "--clear-groups",
         sys.executable, "-c", code],
        env=child_environment({"PYTHONPATH": str(checkout)}),
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    if result.returncode not in (0, 3):
        pytest.skip(f"cannot run a child as nobody here: {result.stderr.strip()[-200:]}")
    assert result.returncode == 3, result.stdout
    assert result.stdout.startswith(f"{path} is mode 0644, so group or others may read it")
    assert f"uid {os.geteuid()}" in result.stdout and "chmod 600" in result.stdout
    assert mode(path) == 0o644


def test_secure_existing_files_skips_missing_files(tmp_path: Path) -> None:
    secure_existing_files([tmp_path / "absent", tmp_path / "absent-wal"])
    assert os.listdir(tmp_path) == []
