"""The users file of --auth-file and `python run.py users add|remove|list`: salted hashes, never a
password; written whole and readable by its owner only; wrong input answered with a message."""

from __future__ import annotations

import io
import stat

import pytest

from streaming.run.users import (
    UsersFile,
    UsersFileError,
    add_user,
    parse_users,
    read_token,
    read_users,
    remove_user,
    session_key,
)
from streaming.run.users_command import run_users

PASSWORD = "correct horse battery"


def users(*argv: str, stdin: str = "") -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run_users(list(argv), stdin=io.StringIO(stdin), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_add_writes_a_salted_scrypt_hash_and_never_the_password(tmp_path):
    path = tmp_path / "users.txt"
    assert users("add", "alice", "--role", "operator", "--auth-file", str(path), "--password-stdin",
                 stdin=PASSWORD + "\n")[0] == 0
    assert users("add", "bob", "--role", "operator", "--auth-file", str(path), "--password-stdin",
                 stdin=PASSWORD + "\n")[0] == 0
    text = path.read_text()
    assert PASSWORD not in text
    alice, bob = read_users(path)["alice"], read_users(path)["bob"]
    assert alice.password_hash.startswith("scrypt:") and alice.role == "operator"
    assert alice.password_hash != bob.password_hash  # the same password, salted apart


def test_the_file_is_readable_by_its_owner_only_and_left_without_temporary_files(tmp_path):
    path = tmp_path / "users.txt"
    add_user(path, "alice", "viewer", PASSWORD)
    add_user(path, "bob", "operator", PASSWORD)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["users.txt"]


def test_list_shows_names_and_roles_only_and_remove_takes_a_user_out(tmp_path):
    path = tmp_path / "users.txt"
    add_user(path, "alice", "operator", PASSWORD)
    add_user(path, "bob", "viewer", PASSWORD)
    code, out, _ = users("list", "--auth-file", str(path))
    assert (code, out) == (0, "alice\toperator\nbob\tviewer\n")
    assert users("remove", "bob", "--auth-file", str(path))[0] == 0
    assert list(read_users(path)) == ["alice"]


@pytest.mark.parametrize("argv, stdin, code, says", [
    (["add", "alice", "--role", "admin"], "x" * 10, 2, "invalid choice: 'admin'"),
    (["add", "alice", "--role", "viewer"], "", 2, "no terminal to ask for the password"),
    (["add", "alice", "--role", "viewer", "--password-stdin"], "\n", 2, "stdin gave no password"),
    (["add", "alice", "--role", "viewer", "--password-stdin"], "short\n", 1, "too short"),
    (["add", "al:ice", "--role", "viewer", "--password-stdin"], PASSWORD, 1, "invalid user name"),
    (["remove", "nobody"], "", 1, "no user 'nobody'"),
    (["list"], "", 2, "--auth-file"),
    ([], "", 2, "required"),
])
def test_wrong_input_gets_a_message_and_an_exit_code_never_a_traceback(tmp_path, argv, stdin, code, says):
    path = tmp_path / "users.txt"
    add_user(path, "bob", "viewer", PASSWORD)
    argv = [*argv, "--auth-file", str(path)] if argv and argv != ["list"] else argv
    got, _, err = users(*argv, stdin=stdin)
    assert got == code and says in err and "Traceback" not in err


def test_adding_a_name_already_there_changes_nothing(tmp_path):
    path = tmp_path / "users.txt"
    add_user(path, "alice", "viewer", PASSWORD)
    before = path.read_text()
    code, _, err = users("add", "alice", "--role", "operator", "--auth-file", str(path), "--password-stdin",
                         stdin="another password")
    assert code == 1 and "already in" in err and path.read_text() == before


def test_a_missing_file_says_how_to_add_users(tmp_path):
    with pytest.raises(UsersFileError, match="python run.py users add"):
        read_users(tmp_path / "none.txt")


@pytest.mark.parametrize("line, says", [
    ("alice:root:scrypt:1$a$b", "invalid role"), ("alice:viewer:secret", "no password hash"),
    ("al ice:viewer:scrypt:1$a$b", "invalid user name"),
])
def test_a_file_with_a_bad_line_names_the_line(line, says):
    with pytest.raises(UsersFileError, match=f"line 2: .*{says}"):
        parse_users("# users\n" + line + "\n")


def test_a_password_is_checked_against_its_hash_and_a_wrong_one_or_name_is_refused(tmp_path):
    path = tmp_path / "users.txt"
    add_user(path, "alice", "operator", PASSWORD)
    file = UsersFile(path)
    user = file.check("alice", PASSWORD)
    assert user is not None and (user.name, user.role) == ("alice", "operator")
    assert file.check("alice", PASSWORD) == user  # remembered: no second scrypt
    assert file.check("alice", PASSWORD + "x") is None
    assert file.check("mallory", PASSWORD) is None


def test_a_running_app_sees_users_added_and_removed_without_a_restart(tmp_path):
    path = tmp_path / "users.txt"
    add_user(path, "alice", "operator", PASSWORD)
    file = UsersFile(path)
    assert file.check("alice", PASSWORD) is not None
    add_user(path, "bob", "viewer", PASSWORD)
    remove_user(path, "alice")
    assert file.check("alice", PASSWORD) is None and file.user("bob") is not None


def test_passwords_are_checked_by_werkzeug_whose_hash_compare_is_constant_time(monkeypatch, tmp_path):
    """check_password_hash compares digests with hmac.compare_digest; a user's hash is never compared with ==."""
    import streaming.run.users as module

    path = tmp_path / "users.txt"
    add_user(path, "alice", "operator", PASSWORD)
    seen = []
    real = module.check_password_hash
    monkeypatch.setattr(module, "check_password_hash", lambda h, p: seen.append(h) or real(h, p))
    assert UsersFile(path).check("alice", "wrong password") is None
    assert seen == [read_users(path)["alice"].password_hash]


def test_the_session_key_is_made_once_and_kept_in_a_private_file(tmp_path):
    key_file = tmp_path / "session.key"
    key = session_key(key_file)
    assert session_key(key_file) == key and len(key) == 32
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert session_key(key_file, "from the environment") == b"from the environment"


def test_a_metrics_token_file_needs_a_long_enough_token(tmp_path):
    token = tmp_path / "token"
    token.write_text("0123456789abcdef0123\n")
    assert read_token(token) == "0123456789abcdef0123"
    token.write_text("short\n")
    with pytest.raises(UsersFileError, match="too short"):
        read_token(token)
