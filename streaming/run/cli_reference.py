"""docs/cli.md, rendered from the argparse parsers: `python -m streaming.run.cli_reference > docs/cli.md`."""

from __future__ import annotations

import argparse
import re
import sys

from streaming.run.arguments import (
    LOAD_ON_STOP,
    RUN_ON_STOP,
    USERS_ON_STOP,
    build_load_parser,
    build_parser,
    build_users_parser,
)
from streaming.run.environment import KAFKA_ENV_PREFIX, OFF_WORDS, ON_WORDS, long_flag, variable_of

REGENERATE = "python -m streaming.run.cli_reference > docs/cli.md"
# A help text's last parenthesis, when it gives the default ("... (default: 20.0)").
_DEFAULT_AT_END = re.compile(r"^(?P<meaning>.*?)\s*\(default: (?P<default>.*)\)$", re.DOTALL)
# A word shown as code: a flag, or one markdown would misread (AWS_*, <data-dir>/checkpoints).
_CODE_WORD = re.compile(r"^(--[\w-]+|\S*[_*<]\S*)$")


def _markdown(text: str) -> str:
    """Prose for a table cell: flags and words with markdown's special characters as code, pipes escaped."""
    words = []
    for word in text.split():
        core = word.lstrip("(").rstrip("),.;:")
        if core and _CODE_WORD.match(core):
            start = word.index(core)
            word = f"{word[:start]}`{core}`{word[start + len(core):]}"
        words.append(word)
    return " ".join(words).replace("|", "\\|")


def _invocation(action: argparse.Action) -> str:
    """'--port PORT', '--clean-source {off,archive,delete}', '--no-producer': as --help writes it."""
    flag = long_flag(action)
    if action.nargs == 0:
        return f"{flag}"
    if action.metavar is not None:
        value = action.metavar
    elif action.choices is not None:
        value = "{" + ",".join(str(choice) for choice in action.choices) + "}"
    else:
        value = action.dest.upper()
    return f"{flag} {value}"


def _meaning_and_default(parser: argparse.ArgumentParser, action: argparse.Action) -> tuple[str, str]:
    help_text = parser._get_formatter()._expand_help(action)  # argparse's own %(default)s expansion
    found = _DEFAULT_AT_END.match(help_text)
    if found:
        return found["meaning"], found["default"]
    if action.required:
        return help_text, "required"
    if action.nargs == 0:
        return help_text, "off"
    return help_text, "none"


def _group_table(parser: argparse.ArgumentParser, group: argparse._ArgumentGroup,
                 environment: bool = True) -> list[str]:
    rows = ["| flag | default | meaning | environment |", "|---|---|---|---|"]
    for action in group._group_actions:
        if long_flag(action) is None:
            continue
        meaning, default = _meaning_and_default(parser, action)
        invocation = _invocation(action).replace("|", "\\|")
        variable = f"`{variable_of(long_flag(action) or '')}`" if environment else "none"
        rows.append(f"| `{invocation}` | {_markdown(default)} | {_markdown(meaning)} | {variable} |")
    return rows if len(rows) > 2 else []


def _command(title: str, parser: argparse.ArgumentParser, on_stop: str) -> list[str]:
    lines = [f"## `{title}`", "", "```text", parser.description or "", "```", "", on_stop, ""]
    for group in parser._action_groups:  # argparse keeps no public list of its groups
        table = _group_table(parser, group)
        if table:
            lines += [f"### {group.title}", "", *table, ""]
    return lines


def _users() -> list[str]:
    """`python run.py users` and a table per subcommand (add, remove, list)."""
    parser = build_users_parser()
    lines = [f"## `{parser.prog}`", "", "```text", parser.description or "", "```", "", USERS_ON_STOP, ""]
    subcommands = next(action for action in parser._actions if isinstance(action, argparse._SubParsersAction))
    for name, sub in subcommands.choices.items():
        lines += [f"### `{parser.prog} {name} NAME`" if name != "list" else f"### `{parser.prog} {name}`", "",
                  sub.description or "", ""]
        for group in sub._action_groups:
            table = _group_table(sub, group, environment=False)  # `users` reads flags only
            if table:
                lines += [*table, ""]
    return lines


def _environment() -> list[str]:
    on, off = (", ".join(f"`{word}`" for word in words if word) for words in (ON_WORDS, OFF_WORDS))
    example = variable_of("--data-dir")
    return [
        "## The environment",
        "",
        f"- Every flag can also be set in the environment as `{variable_of('--<flag>')}`: the flag's name "
        f"in capitals, its dashes as underscores (`--data-dir` -> `{example}`). A flag on the command line wins "
        "over its variable.",
        f"- An on/off flag (`--no-producer`, `--available-now`) is on with {on}, off with {off} or an empty "
        "value; any other value is a usage error.",
        "- A repeatable flag (`--conf`, `--storage-option`, `--allow-host`) takes one value from its variable, "
        "before those given on the command line.",
        f"- Kafka client settings (SASL, TLS) come from `--kafka-config FILE` and from `{KAFKA_ENV_PREFIX}<SETTING>`, "
        f"dots written as underscores (`{KAFKA_ENV_PREFIX}SASL_PASSWORD` -> `sasl.password`); a variable wins over "
        "the file. A `bootstrap.servers` among them is used when `--bootstrap-servers` is not given. Secrets are "
        "never printed.",
        "",
    ]


def render() -> str:
    lines = [
        "# Command line",
        "",
        f"<!-- Generated from streaming/run/arguments.py by `{REGENERATE}`; do not edit by hand "
        "(tests/unit/test_cli_reference.py fails when this page and the parsers differ). -->",
        "",
        "Every flag of `python run.py` (the app), `python run.py load` (the loader of trade files) and `python run.py "
        "users` (who may log in), with its default and its environment variable. `python run.py --help`, `python "
        "run.py load --help` and `python run.py users add --help` say the same.",
        "",
        *_environment(),
        *_command("python run.py", build_parser(), RUN_ON_STOP),
        *_command("python run.py load", build_load_parser(), LOAD_ON_STOP),
        *_users(),
    ]
    return "\n".join(lines).rstrip("\n") + "\n"


if __name__ == "__main__":
    sys.stdout.write(render())
