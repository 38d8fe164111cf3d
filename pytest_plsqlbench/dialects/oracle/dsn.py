"""Connection strings and identifiers: DSN parsing, quoting, the names and passwords the harness makes."""

from __future__ import annotations

import re
import secrets
import string
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field

from ...errors import UsageError

USER_PREFIX = "PLSQLB_"

# --------------------------------------------------------------------------- connection strings
@dataclass(frozen=True)
class OracleDsn:
    """What ``oracledb.connect`` needs: user, password, connect string, extra parameters."""

    user: str
    password: str
    dsn: str
    params: Mapping[str, str] = field(default_factory=dict)

    def redacted(self) -> str:
        return f"{self.user}@{self.dsn}"


def parse_dsn(text: str) -> OracleDsn:
    """``user/password@connect_string`` or ``oracle://user:password@host:port/service?k=v``.

    The connect string may be EZConnect (``host:1521/FREEPDB1``), a tnsnames alias (with
    ``TNS_ADMIN`` or ``?config_dir=``) or a full descriptor; query parameters
    (``config_dir``, ``wallet_location``, ``wallet_password`` ...) are passed to
    ``oracledb.connect``, which is how Autonomous Database wallets are given.
    """
    text = text.strip()
    if re.match(r"^oracle(\+\w+)?://", text, re.I):
        url = urllib.parse.urlsplit(text)
        params = dict(urllib.parse.parse_qsl(url.query))
        service = url.path.lstrip("/") or params.pop("service_name", "")
        host = url.hostname or ""
        if not url.username or not host:
            raise UsageError(
                "--plsql-dsn: an oracle:// URL needs user and host (oracle://user:pass@host:1521/service)"
            )
        port = f":{url.port}" if url.port else ""
        dsn = f"{host}{port}/{service}" if service else f"{host}{port}"
        return OracleDsn(
            urllib.parse.unquote(url.username), urllib.parse.unquote(url.password or ""), dsn, params
        )
    credentials, sep, connect = text.rpartition("@")
    if not sep or "/" not in credentials or not connect:
        raise UsageError(
            "--plsql-dsn for oracle: expected user/password@host:port/service or "
            "oracle://user:password@host:port/service"
        )
    user, _, password = credentials.partition("/")
    return OracleDsn(user, password, connect, {})


def quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def candidate_name(worker: str) -> str:
    """A fresh candidate user name for a worker (``PLSQLB_GW0_1A2B3C``)."""
    tag = re.sub(r"[^A-Za-z0-9]", "", worker).upper()[:20] or "MAIN"
    return f"{USER_PREFIX}{tag}_{secrets.token_hex(3).upper()}"


def new_password() -> str:
    """A password Autonomous Database's rules accept (12-30 chars, upper, lower, digit, no quote)."""
    alphabet = string.ascii_letters + string.digits
    return "Pw9_" + "".join(secrets.choice(alphabet) for _ in range(22))



def _bare(name: str) -> str:
    return name[1:-1] if name.startswith('"') else name.upper()

