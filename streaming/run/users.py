"""Who may log in: the users file (a name, a role and a salted scrypt hash a line; never a password),
its atomic 0600 writes, the password check, and the other secrets of logins (session key, /metrics token).

The Flask side (login form, HTTP Basic, the bearer for /metrics, `may`) is dashboard/access.py."""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import os
import re
import secrets
import threading
from dataclasses import dataclass
from pathlib import Path

from werkzeug.security import check_password_hash, generate_password_hash

from streaming.config import Settings

VIEWER, OPERATOR = "viewer", "operator"
ROLES = (VIEWER, OPERATOR)
HASH_METHOD = "scrypt"  # werkzeug's default: salted, memory-hard
MIN_PASSWORD_LENGTH = 8
HEADER = ("# Trade Summary users: NAME:ROLE:HASH a line (salted scrypt hashes, never a password).\n"
          "# Edit with python run.py users add|remove|list --auth-file FILE.\n")
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$")
ADD_USERS = "python run.py users add NAME --role viewer|operator --auth-file FILE"
SESSION_KEY_FILE = ".trade-summary-session.key"  # beside the run's lock file: one key per data dir


class UsersFileError(ValueError):
    """A users file that cannot be read or used; the message names the file and the line."""


@dataclass(frozen=True)
class User:
    """Someone logged in (or, with logins off, anyone: name None)."""

    name: str | None
    role: str


@dataclass(frozen=True)
class UserRecord:
    name: str
    role: str
    password_hash: str


def check_name(name: str) -> str:
    """The name as given, or UsersFileError saying what a name may hold."""
    if not NAME.match(name):
        raise UsersFileError(f"invalid user name {name!r}: 1 to 64 letters, digits and _ . @ -, starting with a "
                             "letter or digit")
    return name


def check_role(role: str) -> str:
    if role not in ROLES:
        raise UsersFileError(f"invalid role {role!r}: expected {' or '.join(ROLES)}")
    return role


def hash_password(password: str) -> str:
    if len(password) < MIN_PASSWORD_LENGTH:
        raise UsersFileError(f"the password is too short: at least {MIN_PASSWORD_LENGTH} characters")
    return generate_password_hash(password, method=HASH_METHOD)


def parse_users(text: str, source: str = "the users file") -> dict[str, UserRecord]:
    """NAME:ROLE:HASH lines (# comments and blank lines skipped) -> records by name."""
    records: dict[str, UserRecord] = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, _, rest = line.partition(":")
        role, _, password_hash = rest.partition(":")
        try:
            check_name(name)
            check_role(role)
        except UsersFileError as exc:
            raise UsersFileError(f"{source}, line {number}: {exc}") from None
        if not password_hash.startswith(("scrypt:", "pbkdf2:")):
            raise UsersFileError(f"{source}, line {number}: no password hash (scrypt or pbkdf2) for {name!r}")
        if name in records:
            raise UsersFileError(f"{source}, line {number}: {name!r} is there twice")
        records[name] = UserRecord(name, role, password_hash)
    return records


def render_users(records: dict[str, UserRecord]) -> str:
    return HEADER + "".join(f"{r.name}:{r.role}:{r.password_hash}\n" for r in sorted(records.values(),
                                                                                      key=lambda r: r.name))


def read_users(path: Path) -> dict[str, UserRecord]:
    """The users in `path`; UsersFileError when it cannot be read or parsed."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise UsersFileError(f"no users file at {path}: add users with `{ADD_USERS}`") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsersFileError(f"cannot read the users file {path}: {exc}") from None
    return parse_users(text, str(path))


def write_private(path: Path, text: str) -> None:
    """`text` into `path` atomically (a temporary file beside it, renamed over it), readable by its owner only."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(descriptor, "w") as file:
            file.write(text)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)
    os.chmod(path, 0o600)


def add_user(path: Path, name: str, role: str, password: str) -> None:
    """A new user in the file (created if missing); UsersFileError for a name already there."""
    check_name(name)
    check_role(role)
    records = read_users(path) if path.exists() else {}
    if name in records:
        raise UsersFileError(f"{name!r} is already in {path}: `python run.py users remove {name} --auth-file "
                             f"{path}` first to change the password or the role")
    records[name] = UserRecord(name, role, hash_password(password))
    write_private(path, render_users(records))


def remove_user(path: Path, name: str) -> None:
    records = read_users(path)
    if name not in records:
        raise UsersFileError(f"no user {name!r} in {path}")
    del records[name]
    write_private(path, render_users(records))


# A hash checked for an unknown name, so that a wrong name costs as long as a wrong password.
_UNKNOWN_USER_HASH = generate_password_hash(secrets.token_hex(16), method=HASH_METHOD)


class UsersFile:
    """The users file of a running app, read again when it changes (users added while it runs
    count at once). Passwords are checked with check_password_hash (scrypt, constant-time
    compare); a name and password checked once is remembered by a keyed digest for the next
    request of the same script, so HTTP Basic does not cost a scrypt per request."""

    def __init__(self, path: Path):
        self.path = path
        self._lock = threading.Lock()
        self._stamp: tuple[int, int] | None = None
        self._records: dict[str, UserRecord] = {}
        self._key = secrets.token_bytes(32)  # this process's, for the digests of checked passwords
        self._checked: dict[bytes, str] = {}
        self.records()  # fails at once on a bad file

    def records(self) -> dict[str, UserRecord]:
        try:
            stat = self.path.stat()
            stamp = (stat.st_mtime_ns, stat.st_size)
        except OSError:
            stamp = None
        with self._lock:
            if stamp != self._stamp or stamp is None:
                try:
                    self._records = read_users(self.path)
                except UsersFileError:
                    if self._stamp is None:
                        raise
                    # A file being replaced by hand: keep the users read last rather than let nobody in.
                    return self._records
                self._stamp = stamp
                self._checked.clear()
            return self._records

    def user(self, name: str) -> User | None:
        record = self.records().get(name)
        return User(record.name, record.role) if record is not None else None

    def check(self, name: str, password: str) -> User | None:
        """The user when the password is theirs, else None (as slow for an unknown name)."""
        records = self.records()
        digest = hmac.new(self._key, f"{name}\0{password}".encode(), hashlib.sha256).digest()
        record = records.get(name)
        if record is not None and self._checked.get(digest) == record.password_hash:
            return User(record.name, record.role)
        if not check_password_hash(record.password_hash if record else _UNKNOWN_USER_HASH, password) or not record:
            return None
        with self._lock:
            if len(self._checked) > 1000:
                self._checked.clear()
            self._checked[digest] = record.password_hash
        return User(record.name, record.role)


def read_token(path: Path) -> str:
    """The /metrics bearer token from its file (its first line); UsersFileError if unusable."""
    try:
        lines = path.read_text().strip().splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsersFileError(f"cannot read the metrics token file {path}: {exc}") from None
    token = lines[0].strip() if lines else ""
    if len(token) < 16:
        raise UsersFileError(f"the metrics token in {path} is empty or too short: at least 16 characters, e.g. "
                             "from `openssl rand -hex 32`")
    return token


def session_key(path: Path | None, from_environment: str | None = None) -> bytes:
    """The key that signs session cookies: the environment's, else the one kept in `path` (0600),
    made on first use, so sessions outlive a restart."""
    if from_environment:
        return from_environment.encode()
    if path is None:
        raise UsersFileError("no session key: give a file for it or TRADE_SUMMARY_SESSION_KEY")
    try:
        return bytes.fromhex(path.read_text().strip())
    except (OSError, ValueError):
        key = secrets.token_bytes(32)
        write_private(path, key.hex() + "\n")
        return key


@dataclass(frozen=True)
class Logins:
    """What the web side needs to know of logins: the users file (None: logins off), the /metrics
    token file, and where the session key lives (or the key itself, from the environment)."""

    users_file: Path | None = None
    metrics_token_file: Path | None = None
    session_key_file: Path | None = None
    session_key_value: str | None = None

    def __repr__(self) -> str:  # the key is a secret
        return f"Logins(users_file={self.users_file}, metrics_token_file={self.metrics_token_file})"


def logins_of(settings: Settings) -> Logins:
    """What the web side needs of a run's settings."""
    return Logins(settings.auth_file, settings.metrics_token_file, settings.lock_file.with_name(SESSION_KEY_FILE),
                  settings.session_key)


def is_loopback(host: str) -> bool:
    """127.0.0.1 (any of 127/8), ::1 or localhost: an address only this machine reaches."""
    host = host.strip().strip("[]").lower()
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a name may resolve to any address


def open_address_refusal(host: str) -> str:
    """Why the app does not start on `host` with no logins, and the two ways on."""
    return (f"--host {host} serves the page, its actions, /api/* and /metrics to every machine that reaches it, "
            "and logins are off, so the app does not start (as Redis' protected mode). Add users with "
            f"`python run.py users add NAME --role operator --auth-file users.txt` and start with --auth-file "
            "users.txt; or give --insecure-no-login to serve it open to anyone who reaches the port")
