"""Typed errors of the executor, each with a stable code (house convention)."""

from __future__ import annotations


class ExecutorError(Exception):
    code = "EXECUTOR_ERROR"


class ImageDigestMismatch(ExecutorError):
    """The local image is not the one the learning process pinned: it is never run."""

    code = "IMAGE_DIGEST_MISMATCH"

    def __init__(self, reference: str, pinned: str, local: str | None):
        self.reference, self.pinned, self.local = reference, pinned, local
        found = local if local else "no such local image"
        super().__init__(f"image {reference}: local digest {found} does not match the pinned digest {pinned}")


class ImageBuildError(ExecutorError):
    code = "IMAGE_BUILD_FAILED"


class RuntimeUnavailable(ExecutorError):
    """The runtime cannot run here (no engine socket, no bubblewrap)."""

    code = "RUNTIME_UNAVAILABLE"


class TaskFailed(ExecutorError):
    """The task ran but produced no valid signed manifest."""

    code = "TASK_FAILED"


class ManifestInvalid(ExecutorError):
    """A manifest's signature or one of its digests does not check out."""

    code = "MANIFEST_INVALID"
