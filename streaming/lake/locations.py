"""Where the tables live: a local path or an object-store URI, and the storage options that
reach it. Pure functions, except `arrow_filesystem`, which only builds a client.

A data dir is a `Path` when it is local (a plain path or `file://...`) and a `str` URI when it
is remote (`s3://bucket/prefix`, `gs://`, `abfss://`, ...). deltalake reads the standard
environment variables itself (AWS_*, AZURE_*, GOOGLE_*); the Spark tasks that write table files
may run on other hosts, with another environment, so the driver hands them the options it
resolved (`options_for_tasks`).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Mapping
from urllib.parse import urlparse

# URI schemes deltalake writes to (object_store's names and their aliases).
REMOTE_SCHEMES = ("s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "adl", "azure")
# Environment variables that configure an object store, as deltalake reads them.
STORAGE_ENV_PREFIXES = ("AWS_", "AZURE_", "GOOGLE_")
# Storage option keys whose values are secrets (an access key id is not, but it names an account).
_SECRET = re.compile(r"secret|key|token|password|credential|sas|signature|bearer", re.IGNORECASE)
_URI = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://(.*)$")


def _parse(text: str, example: str) -> Path | tuple[str, str, str]:
    """A location flag's value: a local path (a plain path or file://) -> Path; another URI ->
    (its lower-case scheme, the rest after '://', the text as given)."""
    text = str(text).strip()
    match = _URI.match(text)
    if match is None:
        if not text:
            raise ValueError(f"expected a path or a URI such as {example}")
        return Path(text)
    scheme, rest = match.group(1).lower(), match.group(2)
    return Path("/" + rest.lstrip("/")) if scheme == "file" else (scheme, rest, text)


def data_location(text: str) -> Path | str:
    """A --data-dir value: a local path (a plain path or file://) -> Path; an object-store URI
    -> the URI as given (without a trailing slash). Raises ValueError for other schemes."""
    parsed = _parse(text, "s3://bucket/prefix")
    if isinstance(parsed, Path):
        return parsed
    scheme, rest, given = parsed
    if scheme not in REMOTE_SCHEMES:
        raise ValueError(f"unsupported location {given!r}: expected a local path or a URI with one of the schemes "
                         f"file, {', '.join(REMOTE_SCHEMES)}")
    if not urlparse(given).netloc:
        raise ValueError(f"location {given!r} names no bucket or container, e.g. s3://bucket/prefix")
    return f"{scheme}://{rest.rstrip('/')}"


def checkpoint_location(text: str) -> Path | str:
    """A --checkpoint-dir value: a local path (or file://) -> Path; another URI (hdfs://,
    s3a://, ...: whatever Spark's Hadoop file systems take) -> the URI as given."""
    parsed = _parse(text, "hdfs://namenode/checkpoints")
    return parsed if isinstance(parsed, Path) else parsed[2].rstrip("/")


def local_directory(text: str) -> Path:
    """A directory that must be on this machine's disk (the embedded broker's)."""
    location = checkpoint_location(text)
    if not isinstance(location, Path):  # a URI
        raise ValueError(f"{text!r} is not a local path: the embedded broker keeps its data on this machine")
    return location


def is_remote(location: str | Path) -> bool:
    """Whether a location is an object-store or Hadoop URI rather than a local path."""
    if isinstance(location, Path):
        return False
    match = _URI.match(str(location))
    return match is not None and match.group(1).lower() != "file"


def local_path(location: str | Path) -> Path:
    """A local location as a Path (file:// stripped)."""
    text = str(location)
    return Path("/" + text[len("file://"):].lstrip("/")) if text.startswith("file://") else Path(text)


def storage_option_pair(text: str) -> tuple[str, str]:
    """'AWS_REGION=eu-west-1' -> ('AWS_REGION', 'eu-west-1')."""
    key, sep, value = str(text).partition("=")
    if not sep or not key.strip():
        raise ValueError(f"expected KEY=VALUE, e.g. AWS_REGION=eu-west-1; got {_redacted_text(text)!r}")
    return key.strip(), value.strip()


def _redacted_text(text: str) -> str:
    key, sep, _ = str(text).partition("=")
    return f"{key}=***" if sep and _SECRET.search(key) else (key if sep else text)


def redact_storage_options(options: Mapping[str, str]) -> dict[str, str]:
    """Storage options safe to print: secret values replaced by '***'."""
    return {key: ("***" if _SECRET.search(key) else value) for key, value in options.items()}


def options_for_tasks(flags: Mapping[str, str], environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The storage options a task on any host needs: the standard environment variables of
    this process (as deltalake reads them), then the --storage-option flags over them."""
    environ = os.environ if environ is None else environ
    found = {key: value for key, value in environ.items() if key.startswith(STORAGE_ENV_PREFIXES)}
    return with_plain_http_allowed({**found, **flags})


ENDPOINT_KEYS = frozenset({"aws_endpoint_url", "aws_endpoint", "endpoint_url", "endpoint"})
ALLOW_HTTP_KEYS = frozenset({"aws_allow_http", "allow_http"})


def with_plain_http_allowed(options: dict[str, str]) -> dict[str, str]:
    """An http:// endpoint (MinIO, a local S3) is what the user asked for: allow plain HTTP for
    it unless an allow-http option says otherwise, rather than failing every request with
    the object store's "URL scheme is not allowed"."""
    keys = {key.lower() for key in options}
    plain = any(key.lower() in ENDPOINT_KEYS and value.strip().lower().startswith("http://")
                for key, value in options.items())
    if plain and not keys & ALLOW_HTTP_KEYS:
        return {**options, "AWS_ALLOW_HTTP": "true"}
    return options


def arrow_filesystem(location: str | Path, options: Mapping[str, str] | None = None):
    """(pyarrow FileSystem, the location's path in it). A remote location goes through
    deltalake's own object store, so files reach it exactly as deltalake's commits do, with
    the same storage options and environment variables."""
    import pyarrow.fs as pafs

    if not is_remote(location):
        return pafs.LocalFileSystem(), str(local_path(location))
    from deltalake.fs import DeltaStorageHandler

    return pafs.PyFileSystem(DeltaStorageHandler(str(location), dict(options) if options else None)), ""


class StorageUnreachable(Exception):
    """The object store behind a remote location cannot be listed (no bucket, no access, no
    connection): the message says why, in a line."""


ANSI_ESCAPES = re.compile(r"\x1b\[[0-9;]*m")
S3_ERROR = re.compile(r"<Code>(?P<code>[^<]*)</Code>\s*<Message>(?P<message>[^<]*)</Message>")


def storage_error_summary(error: BaseException | str) -> str:
    """An object-store error of deltalake's (a chain of "↳ cause" lines, ANSI colours, the
    server's XML) as one readable line: the store's own code and message when it sent one,
    else the innermost causes."""
    text = ANSI_ESCAPES.sub("", str(error))
    found = S3_ERROR.search(text)
    if found:
        return f"{found['code']}: {found['message']}"
    causes = [line.strip().lstrip("↳").strip() for line in text.splitlines()]
    causes = [cause for cause in causes if cause]
    return "; ".join(causes[-3:]) if causes else type(error).__name__


def check_reachable(location: str | Path, options: Mapping[str, str] | None = None) -> None:
    """Lists a remote location's prefix once (a local one needs nothing): raises
    StorageUnreachable rather than letting the first table open fail deep in a start."""
    if not is_remote(location):
        return
    import pyarrow.fs as pafs

    filesystem, root = arrow_filesystem(location, options)
    try:
        filesystem.get_file_info(pafs.FileSelector(root, allow_not_found=True))
    except OSError as exc:
        raise StorageUnreachable(f"cannot reach the tables at {location}: {storage_error_summary(exc)}") from None
