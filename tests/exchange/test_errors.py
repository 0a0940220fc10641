"""One error hierarchy for the exchange: each error is also the builtin a caller expects, with a code."""

from __future__ import annotations

import pytest

from exchange import errors as E


@pytest.mark.parametrize(
    "error, builtin, code",
    [
        (E.ArtifactNotFound, LookupError, "ARTIFACT_NOT_FOUND"),
        (E.ArtifactCorrupted, ValueError, "ARTIFACT_CORRUPTED"),
        (E.ArtifactForbidden, PermissionError, "ARTIFACT_FORBIDDEN"),
        (E.ArtifactUnreachable, ConnectionError, "ARTIFACT_UNREACHABLE"),
        (E.LocationUnknown, LookupError, "LOCATION_UNKNOWN"),
        (E.LocationRefused, ValueError, "LOCATION_REFUSED"),
    ],
)
def test_artifact_errors(error, builtin, code):
    assert issubclass(error, E.ArtifactError) and issubclass(error, E.ExchangeError)
    assert issubclass(error, builtin) and error.code == code


def test_decryption_error_is_a_value_error_not_an_artifact_error():
    assert issubclass(E.DecryptionError, (E.ExchangeError, ValueError))
    assert not issubclass(E.DecryptionError, E.ArtifactError)
    assert E.DecryptionError.code == "DECRYPTION_FAILED"
