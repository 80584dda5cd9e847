"""`python run.py users add|remove|list`: the users file of --auth-file, edited from the command line.

The password is asked twice at the terminal (getpass) or read from stdin; it is never printed."""

from __future__ import annotations

import getpass
import sys
from typing import TextIO

from streaming.config import UsageError
from streaming.run.arguments import build_users_parser
from streaming.run.users import UsersFileError, add_user, read_users, remove_user

HELP = "python run.py users --help"


def read_password(from_stdin: bool, stdin: TextIO, ask=getpass.getpass) -> str:
    """stdin's first line (--password-stdin), else asked twice at the terminal."""
    if from_stdin:
        line = stdin.readline()
        password = line.rstrip("\r\n")
        if not password:
            raise UsageError("--password-stdin: stdin gave no password")
        return password
    if not stdin.isatty():
        raise UsageError("no terminal to ask for the password: give --password-stdin and the password on stdin")
    password = ask("Password: ")
    if ask("Password again: ") != password:
        raise UsersFileError("the two passwords differ; nothing was changed")
    return password


def run_users(argv: list[str], stdin: TextIO | None = None, stdout: TextIO | None = None,
              stderr: TextIO | None = None, ask=getpass.getpass) -> int:
    """Exit code 0 done, 1 the file cannot be read or changed (or a name there already), 2 a usage error."""
    stdin, stdout, stderr = stdin or sys.stdin, stdout or sys.stdout, stderr or sys.stderr
    try:
        ns = build_users_parser().parse_args(argv)
        path = ns.auth_file.expanduser().absolute()
        if ns.action == "add":
            password = read_password(ns.password_stdin, stdin, ask)
            add_user(path, ns.name, ns.role, password)
            print(f"added {ns.role} {ns.name} to {path}", file=stdout)
        elif ns.action == "remove":
            remove_user(path, ns.name)
            print(f"removed {ns.name} from {path}", file=stdout)
        else:
            records = read_users(path)
            for record in sorted(records.values(), key=lambda r: r.name):
                print(f"{record.name}\t{record.role}", file=stdout)
            if not records:
                print(f"no users in {path}", file=stderr)
    except UsageError as exc:
        build_users_parser().print_usage(stderr)
        print(f"error: {exc}\nRun `{HELP}` for the subcommands.", file=stderr)
        return 2
    except UsersFileError as exc:
        print(f"error: {exc}", file=stderr)
        return 1
    except OSError as exc:
        print(f"error: cannot write the users file: {exc}", file=stderr)
        return 1
    except (KeyboardInterrupt, EOFError):
        print("\nnothing was changed", file=stderr)
        return 1
    return 0
