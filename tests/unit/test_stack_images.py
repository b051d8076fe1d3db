"""The build base's CA bundle: split into one certificate per file, as Debian's
update-ca-certificates (and its Java hook) read them; a bundle with none is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from cdcbox.errors import StackError
from cdcbox.stack.images import BASE_IMAGE, Docker, build_base, split_certificates

PEM = "-----BEGIN CERTIFICATE-----\n{body}\n-----END CERTIFICATE-----\n"


def test_a_bundle_splits_into_its_certificates_in_order() -> None:
    bundle = "# a comment\n" + PEM.format(body="AAAA") + "\n" + PEM.format(body="BBBB")
    assert [c.splitlines()[1] for c in split_certificates(bundle)] == ["AAAA", "BBBB"]


def test_no_bundle_builds_on_the_base_itself() -> None:
    assert build_base(Docker(env={}), None) == BASE_IMAGE


def test_a_bundle_without_certificates_is_refused_naming_it(tmp_path: Path) -> None:
    bundle = tmp_path / "empty.pem"
    bundle.write_text("not a certificate\n")
    with pytest.raises(StackError, match=f"the CA bundle {bundle} holds no PEM certificate"):
        build_base(Docker(env={}), bundle)
