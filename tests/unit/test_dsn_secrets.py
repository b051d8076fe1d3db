"""A DSN's password never reaches a message (audit 26, case 11): `connect`'s errors, which
the CLI prints, the relay logs on each retry and `cdc-ctl top` shows, name the server by
host, port, database and user only, whichever DSN syntax carries the password."""

from __future__ import annotations

import socket

import pytest

from cdcbox.db import connect, describe_dsn
from cdcbox.errors import CdcboxError

pytestmark = pytest.mark.unit

SECRET = "hunter2-s3cret"


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize(
    "dsn",
    [
        "host=127.0.0.1 port={port} dbname=orders user=app password={secret} connect_timeout=2",
        "postgresql://app:{secret}@127.0.0.1:{port}/orders?connect_timeout=2",
        "postgresql://app@127.0.0.1:{port}/orders?password={secret}&connect_timeout=2",
    ],
    ids=["keyword", "url", "url-query"],
)
def test_an_unreachable_server_is_named_without_the_password(dsn: str) -> None:
    with pytest.raises(CdcboxError) as caught:
        connect(dsn.format(port=closed_port(), secret=SECRET))
    message = str(caught.value)
    assert "unreachable" in message
    assert "127.0.0.1" in message
    assert SECRET not in message


@pytest.mark.parametrize(
    "dsn",
    [
        f"host=127.0.0.1 password={SECRET} dbname=orders port=notaport",
        f"host=db passwrd={SECRET}",
        f"postgresql://app:{SECRET}@db:notaport/orders",
        # Audit 33, case 14: libpq quotes the token it cannot parse, the password here.
        "postgresql://app:S3cr%t!pw@db/orders",
        "host=db password='S3cr%t!pw",
    ],
)
def test_a_malformed_dsn_is_refused_without_the_password(dsn: str) -> None:
    with pytest.raises(CdcboxError) as caught:
        connect(dsn)
    assert SECRET not in str(caught.value)
    assert "S3cr" not in str(caught.value)


def test_describe_dsn_keeps_what_locates_the_server() -> None:
    assert describe_dsn(f"host=db port=5433 dbname=orders user=app password={SECRET}") == (
        "app@db:5433/orders"
    )
    assert describe_dsn(f"postgresql://app:{SECRET}@db/orders") == "app@db/orders"
    assert SECRET not in describe_dsn(f"nonsense password={SECRET}")
