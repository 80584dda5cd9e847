"""The TRADE_SUMMARY_* environment overlay: the variable of each flag, and Kafka client settings from it."""

from __future__ import annotations

import argparse
from typing import Mapping

from streaming.config import UsageError

ENV_PREFIX = "TRADE_SUMMARY_"
# Kafka client settings from the environment: TRADE_SUMMARY_KAFKA_SASL_PASSWORD -> sasl.password
KAFKA_ENV_PREFIX = ENV_PREFIX + "KAFKA_"
# How an on/off flag (--no-producer) is set from the environment; an empty value is off.
ON_WORDS = ("1", "true", "yes", "on")
OFF_WORDS = ("0", "false", "no", "off", "")


def long_flag(action: argparse.Action) -> str | None:
    """The flag a variable stands for: the action's first --long one (None for -h and positionals)."""
    long_flags = [s for s in action.option_strings if s.startswith("--")]
    return long_flags[0] if long_flags and action.dest != "help" else None


def variable_of(flag: str) -> str:
    """--data-dir -> TRADE_SUMMARY_DATA_DIR."""
    return ENV_PREFIX + flag[2:].upper().replace("-", "_")


def env_args(parser: argparse.ArgumentParser, environ: Mapping[str, str]) -> list[str]:
    """TRADE_SUMMARY_<FLAG> variables turned into flags, placed before the real ones so flags win."""
    args: list[str] = []
    for action in parser._actions:  # argparse keeps no public list of its actions
        flag = long_flag(action)
        if flag is None:
            continue
        name = variable_of(flag)
        if name not in environ:
            continue
        value = environ[name]
        if action.nargs == 0:  # store_true
            if value.strip().lower() in ON_WORDS:
                args.append(flag)
            elif value.strip().lower() not in OFF_WORDS:
                raise UsageError(f"{name}={value!r}: expected 1/0, true/false, yes/no or on/off")
        else:
            args.append(f"{flag}={value}")
    return args


def kafka_settings(environ: Mapping[str, str], parser: argparse.ArgumentParser) -> dict[str, str]:
    """librdkafka settings from TRADE_SUMMARY_KAFKA_<SETTING> (dots written as underscores), less
    the variables of the parser's own --kafka-* flags (TRADE_SUMMARY_KAFKA_CONFIG is --kafka-config)."""
    flags = {variable_of(flag) for action in parser._actions if (flag := long_flag(action)) is not None}
    return {name[len(KAFKA_ENV_PREFIX):].lower().replace("_", "."): value
            for name, value in environ.items() if name.startswith(KAFKA_ENV_PREFIX) and name not in flags}
