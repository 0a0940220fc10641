"""Typed errors of the artifact exchange, each with a stable code (house convention).

:class:`ArtifactError` and its subclasses are what the store, the service and the client raise; each is
also the builtin a caller would expect (``LookupError`` for a missing artifact, ``ValueError`` for bytes
that do not match, ``PermissionError`` for a refusal, ``ConnectionError`` for a service out of reach).
:class:`DecryptionError` is a blob that does not open with the key given."""

from __future__ import annotations


class ExchangeError(Exception):
    code = "EXCHANGE_ERROR"


class DecryptionError(ExchangeError, ValueError):
    """The blob cannot be opened with this key (wrong recipient, wrong label, or altered)."""

    code = "DECRYPTION_FAILED"


class ArtifactError(ExchangeError):
    """An artifact cannot be handed out (base class)."""

    code = "ARTIFACT_ERROR"


class ArtifactNotFound(ArtifactError, LookupError):
    """The store holds no artifact with this digest."""

    code = "ARTIFACT_NOT_FOUND"


class ArtifactCorrupted(ArtifactError, ValueError):
    """Retrieved bytes do not hash to the digest they were requested by (or do not open to it)."""

    code = "ARTIFACT_CORRUPTED"


class RoundInputMissing(ArtifactError, LookupError):
    """An input of round r cannot be gathered: a member's part of round r-1 is not completed on the
    ledger, this organisation's own names no state, or a message is over what the image declares
    (:class:`exchange.rounds.RoundFiles`)."""

    code = "ROUND_INPUT_MISSING"


class ArtifactTooLarge(ArtifactError, ValueError):
    """An artifact larger than it may be: than the size its owner's signed index entry (or the model
    record) names, or than this node's configured maximum (``[exchange] max_artifact_bytes``). The
    transfer stops at the bound and nothing of it is kept. ``owner``, ``digest``, ``limit`` (the bound)
    and ``size`` (what the owner announced, or at least what it sent) say which and how much."""

    code = "ARTIFACT_TOO_LARGE"

    def __init__(self, owner: str, digest: str, limit: int, size: int, why: str) -> None:
        super().__init__(
            f"{owner} serves {digest} as {size} bytes or more, over the {limit} bytes {why}: "
            f"refused, nothing kept"
        )
        self.owner, self.digest, self.limit, self.size = owner, digest, limit, size


class ArtifactForbidden(ArtifactError, PermissionError):
    """The owner's service refuses this organisation the artifact (HTTP 403)."""

    code = "ARTIFACT_FORBIDDEN"


class ArtifactUnreachable(ArtifactError, ConnectionError):
    """The owner's artifact service cannot be reached (refused, reset, timed out): its node may be down
    for a while, unlike a refusal or a missing artifact, which are answers."""

    code = "ARTIFACT_UNREACHABLE"


class LocationUnknown(ArtifactError, LookupError):
    """No location is known for the organisation that holds the artifact: it publishes no artifact
    endpoint (membership record) and is not hosted in this process."""

    code = "LOCATION_UNKNOWN"


class LocationRefused(ArtifactError, ValueError):
    """A location that is not an ``https://host[:port]`` endpoint (a path, a ``file://`` URL, another
    scheme): another organisation's artifacts are never read from a path."""

    code = "LOCATION_REFUSED"
