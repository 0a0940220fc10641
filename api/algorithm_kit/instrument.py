"""Sources of nondeterminism caught while an algorithm runs (``consortia algorithm check``, docs/sdk.md).

A task must compute the same bytes wherever and whenever it runs, so its step may not read the clock,
draw from a generator that was not seeded from the task (``ctx.rng``), or reach the network. Reading
the source for such calls misses what a name hides (``from time import time as now``, a helper module,
a library told ``random_state=None``), so :class:`Recorder` watches the algorithm while it runs and
records each finding with the file and line of the algorithm folder that caused it:

* the clock: ``time.time``, ``perf_counter``, ``monotonic``, ``process_time`` (and ``_ns``),
  ``localtime``/``gmtime``/``ctime`` without an argument, ``datetime.now``/``utcnow``/``today``,
  ``date.today`` (the folder's modules get a watched ``datetime``) -- wrapped while the check runs; a
  call made directly from the folder's code counts;
* unseeded randomness: the ``random`` module's functions (unless ``random.seed`` was called in the same
  task), ``random.Random()`` without a seed, ``SystemRandom``, ``os.urandom``, ``uuid.uuid1/uuid4``,
  ``secrets``; numpy's global functions (``np.random.rand``... unless ``np.random.seed`` was called in
  the task) and ``np.random.default_rng()`` without a seed; numpy's and ``random``'s global generator
  drawn from inside a library (their state compared around every ``init``/``step``; the finding then
  names the method); torch's global generator drawn from (``torch.rand*``, ``nn.init``, dropout... seen
  through a ``TorchFunctionMode``, at the nearest line of the folder) without ``torch.manual_seed`` in
  the same task, and ``torch.seed()``;
* the network: any ``socket.*`` audit event (``sys.addaudithook``) raised under the folder's code, which
  is refused (``PermissionError``), as the sandbox refuses it.

Wrappers are installed while a :class:`Recorder` is active and removed after (a function bound while it
was active, ``from time import time``, stays a pass-through wrapper); the audit hook is installed once
per process and does nothing when no recorder is active.
"""

from __future__ import annotations

import datetime as _datetime
import functools
import linecache
import os
import random as _random
import secrets as _secrets
import sys
import time as _time
import types
import uuid as _uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

CLOCK, RANDOMNESS, NETWORK, LABELS = "clock", "randomness", "network", "labels"

_ACTIVE: Recorder | None = None
_HOOKED = False


@dataclass(frozen=True)
class Finding:
    """One source of nondeterminism (or one read of undeclared data) at one line of the folder."""

    kind: str  # CLOCK, RANDOMNESS, NETWORK or LABELS
    what: str
    path: str  # relative to the folder
    line: int
    code: str  # the source line

    def text(self) -> str:
        return f"{self.path}:{self.line}: {self.what}" + (f" ({self.code})" if self.code else "")


class Recorder:
    """Records findings of code that lives in ``folder`` while active (``with recorder:``)."""

    def __init__(self, folder: Path):
        self.folder = Path(folder).resolve()
        self._findings: dict[tuple[str, str, str, int], Finding] = {}
        self._inside: dict[str, bool] = {}
        self.seeded: set[str] = set()  # global generators seeded in the current task
        self._noted_in_task: set[str] = set()
        self._stack = ExitStack()

    # ------------------------------------------------------------------ findings

    def findings(self, kind: str | None = None) -> list[Finding]:
        return [f for f in self._findings.values() if kind is None or f.kind == kind]

    def inside(self, filename: str) -> bool:
        hit = self._inside.get(filename)
        if hit is None:
            try:
                Path(filename).resolve().relative_to(self.folder)
                hit = True
            except (ValueError, OSError):
                hit = False
            self._inside[filename] = hit
        return hit

    def user_frame(self, frame: FrameType | None, direct: bool) -> FrameType | None:
        """``frame`` if it runs the folder's code; with ``direct`` False, the nearest caller that does."""
        while frame is not None:
            if self.inside(frame.f_code.co_filename):
                return frame
            if direct:
                return None
            frame = frame.f_back
        return None

    def note_at(self, kind: str, what: str, filename: str, line: int) -> None:
        path = str(Path(filename).resolve().relative_to(self.folder))
        code = linecache.getline(filename, line).strip()
        self._findings.setdefault((kind, what, path, line), Finding(kind, what, path, line, code))
        if kind == RANDOMNESS:
            self._noted_in_task.add("numpy" if what.startswith("np.") else what.split(".")[0].split()[0])

    def note(self, kind: str, what: str, frame: FrameType | None, direct: bool = True) -> bool:
        """Record ``what`` if ``frame`` (or, unless ``direct``, a caller) is the folder's code."""
        user = self.user_frame(frame, direct)
        if user is None:
            return False
        self.note_at(kind, what, user.f_code.co_filename, user.f_lineno)
        return True

    # ------------------------------------------------------------------ activation

    def watch_module(self, module: types.ModuleType) -> None:
        """Give a module of the folder the watched ``datetime`` (module, class and ``date``) in place of
        the real ones it imported (:class:`WatchedDatetime`)."""
        replacements = {
            id(_datetime): _watched_datetime_module(),
            id(_datetime.datetime): WatchedDatetime,
            id(_datetime.date): WatchedDate,
        }
        for name, value in list(vars(module).items()):
            if id(value) in replacements:
                setattr(module, name, replacements[id(value)])

    def watch_folder_modules(self) -> None:
        """:meth:`watch_module` for every loaded module whose file is in the folder."""
        for module in list(sys.modules.values()):
            if self.inside(getattr(module, "__file__", None) or ""):
                self.watch_module(module)

    def __enter__(self) -> Recorder:
        global _ACTIVE
        if _ACTIVE is not None:
            raise RuntimeError("a Recorder is already active")
        _install_audit_hook()
        self._stack.enter_context(_patched(_clock_patches() + _random_patches() + _numpy_patches()))
        _ACTIVE = self
        return self

    def __exit__(self, *exc: object) -> None:
        global _ACTIVE
        _ACTIVE = None
        self._stack.close()

    @contextmanager
    def task(self, method: Callable[..., Any]) -> Iterator[None]:
        """One ``init``/``step`` call (or the construction) of the algorithm: the global generators must
        be seeded anew within it; a global generator whose state changed while nobody seeded it, and no
        call was seen, is reported at ``method``'s definition."""
        self.seeded = set()
        self._noted_in_task = set()
        self.watch_folder_modules()
        before = _global_states()
        with ExitStack() as stack:
            if "torch" in sys.modules:
                stack.enter_context(_patched(_torch_patches()))
                stack.enter_context(_torch_mode(self))
            yield
        after = _global_states()
        code = getattr(method, "__code__", None)
        for name, state in before.items():
            if after.get(name) != state and name not in self.seeded and name not in self._noted_in_task:
                if code is not None and self.inside(code.co_filename):
                    self.note_at(
                        RANDOMNESS,
                        f"{name}'s global generator was drawn from during {method.__name__} without being "
                        "seeded in it (a library given no random_state/seed?)",
                        code.co_filename,
                        code.co_firstlineno,
                    )


def _global_states() -> dict[str, Any]:
    states: dict[str, Any] = {"random": _random.getstate()}
    np = sys.modules.get("numpy")
    if np is not None:
        kind, keys, pos, has_gauss, cached = np.random.get_state()
        states["numpy"] = (kind, keys.tobytes(), pos, has_gauss, cached)
    return states


# ---------------------------------------------------------------------- patches


Patch = tuple[Any, str, Any]  # (owner, attribute, replacement)


@contextmanager
def _patched(patches: list[Patch]) -> Iterator[None]:
    saved = [(owner, name, getattr(owner, name)) for owner, name, _ in patches]
    try:
        for owner, name, new in patches:
            setattr(owner, name, new)
        yield
    finally:
        for owner, name, old in reversed(saved):
            setattr(owner, name, old)


def _watch(
    fn: Callable[..., Any],
    kind: str,
    what: str,
    when: Callable[[tuple[Any, ...], dict[str, Any]], bool] = lambda a, k: True,
    unless_seeded: str | None = None,
) -> Callable[..., Any]:
    """``fn``, recording ``what`` when called directly by the folder's code (and ``when(args, kwargs)``,
    and the global generator ``unless_seeded`` was not seeded in the task)."""

    @functools.wraps(fn)
    def watched(*args: Any, **kwargs: Any) -> Any:
        rec = _ACTIVE
        if (
            rec is not None
            and when(args, kwargs)
            and (unless_seeded is None or unless_seeded not in rec.seeded)
        ):
            rec.note(kind, what, sys._getframe(1))
        return fn(*args, **kwargs)

    return watched


def _seeding(fn: Callable[..., Any], generator: str) -> Callable[..., Any]:
    """``fn`` (``random.seed``, ``np.random.seed``, ``torch.manual_seed``): seeding with a value marks the
    global generator seeded for the task; seeding with nothing (from the OS) is a finding."""

    @functools.wraps(fn)
    def seeding(*args: Any, **kwargs: Any) -> Any:
        rec = _ACTIVE
        if rec is not None:
            if (args[0] if args else kwargs.get("seed", kwargs.get("a"))) is None:
                rec.note(RANDOMNESS, f"{generator} seeded from the operating system", sys._getframe(1))
            else:
                rec.seeded.add(generator)
        return fn(*args, **kwargs)

    return seeding


def _no_argument(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    return not args and not kwargs


def _no_seed(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    return (args[0] if args else kwargs.get("seed", kwargs.get("x"))) is None


def _clock_patches() -> list[Patch]:
    patches: list[Patch] = []
    for name in (
        "time",
        "time_ns",
        "perf_counter",
        "perf_counter_ns",
        "monotonic",
        "monotonic_ns",
        "process_time",
        "process_time_ns",
        "thread_time",
        "thread_time_ns",
    ):
        patches.append((_time, name, _watch(getattr(_time, name), CLOCK, f"time.{name}() reads the clock")))
    for name in ("localtime", "gmtime", "ctime"):
        patches.append(
            (_time, name, _watch(getattr(_time, name), CLOCK, f"time.{name}() reads the clock", _no_argument))
        )
    return patches


def _note_clock(what: str) -> None:
    rec = _ACTIVE
    if rec is not None:
        rec.note(CLOCK, f"{what} reads the clock", sys._getframe(2))


class WatchedDatetime(_datetime.datetime):
    """``datetime.datetime`` whose ``now``/``utcnow``/``today`` record a finding. Only the folder's own
    modules see it (:meth:`Recorder.watch_module`): replacing the class of the ``datetime`` module itself
    would break C extensions that import the datetime C API while it is replaced."""

    __slots__ = ()

    @classmethod
    def now(cls, tz: Any = None) -> Any:
        _note_clock("datetime.now()")
        return _datetime.datetime.now(tz)

    @classmethod
    def utcnow(cls) -> Any:
        _note_clock("datetime.utcnow()")
        return _datetime.datetime.now(_datetime.UTC).replace(tzinfo=None)

    @classmethod
    def today(cls) -> Any:
        _note_clock("datetime.today()")
        return _datetime.datetime.today()


class WatchedDate(_datetime.date):
    """``datetime.date`` whose ``today`` records a finding (as :class:`WatchedDatetime`)."""

    __slots__ = ()

    @classmethod
    def today(cls) -> Any:
        _note_clock("date.today()")
        return _datetime.date.today()


def _watched_datetime_module() -> types.ModuleType:
    module = types.ModuleType("datetime", _datetime.__doc__)
    module.__dict__.update({k: v for k, v in vars(_datetime).items() if not k.startswith("__")})
    module.__dict__.update(datetime=WatchedDatetime, date=WatchedDate)
    return module


def _random_patches() -> list[Patch]:
    patches: list[Patch] = []
    for name in (
        "random",
        "uniform",
        "triangular",
        "randint",
        "choice",
        "randrange",
        "sample",
        "shuffle",
        "choices",
        "normalvariate",
        "lognormvariate",
        "expovariate",
        "vonmisesvariate",
        "gammavariate",
        "gauss",
        "betavariate",
        "paretovariate",
        "weibullvariate",
        "getrandbits",
        "randbytes",
        "binomialvariate",
    ):
        if hasattr(_random, name):
            what = f"random.{name}() draws from the random module's unseeded global generator"
            patches.append(
                (_random, name, _watch(getattr(_random, name), RANDOMNESS, what, unless_seeded="random"))
            )
    patches.append((_random, "seed", _seeding(_random.seed, "random")))
    original_random = _random.Random

    class WatchedRandom(original_random):
        def __init__(self, x: Any = None) -> None:
            rec = _ACTIVE
            if rec is not None and x is None:
                rec.note(RANDOMNESS, "random.Random() without a seed", sys._getframe(1))
            super().__init__(x)

    patches.append((_random, "Random", WatchedRandom))
    always = "draws from the operating system's entropy"
    patches += [
        (_random, "SystemRandom", _watch(_random.SystemRandom, RANDOMNESS, f"random.SystemRandom {always}")),
        (os, "urandom", _watch(os.urandom, RANDOMNESS, f"os.urandom() {always}")),
        (_uuid, "uuid4", _watch(_uuid.uuid4, RANDOMNESS, f"uuid.uuid4() {always}")),
        (_uuid, "uuid1", _watch(_uuid.uuid1, CLOCK, "uuid.uuid1() reads the clock")),
    ]
    for name in ("token_bytes", "token_hex", "token_urlsafe", "randbelow", "randbits", "choice"):
        patches.append(
            (_secrets, name, _watch(getattr(_secrets, name), RANDOMNESS, f"secrets.{name}() {always}"))
        )
    return patches


_NUMPY_NOT_DRAWS = {"seed", "get_state", "set_state", "get_bit_generator", "set_bit_generator"}


def _numpy_patches() -> list[Patch]:
    np = sys.modules.get("numpy")
    if np is None:
        import numpy as np  # the algorithm's base always has it
    patches: list[Patch] = []
    mtrand = np.random.mtrand
    for name in mtrand.__all__:
        fn = getattr(np.random, name, None)
        if name in _NUMPY_NOT_DRAWS or isinstance(fn, type) or not callable(fn):
            continue
        what = f"np.random.{name}() draws from numpy's global generator"
        patches.append((np.random, name, _watch(fn, RANDOMNESS, what, unless_seeded="numpy")))
    patches.append((np.random, "seed", _seeding(np.random.seed, "numpy")))
    what = "np.random.default_rng() without a seed draws its seed from the operating system"
    patches.append((np.random, "default_rng", _watch(np.random.default_rng, RANDOMNESS, what, _no_seed)))
    return patches


#: torch functions and tensor methods that draw from a generator (torch's global one unless
#: ``generator=`` is given)
TORCH_DRAWS = frozenset(
    {
        "rand",
        "randn",
        "randint",
        "randperm",
        "rand_like",
        "randn_like",
        "randint_like",
        "normal",
        "bernoulli",
        "multinomial",
        "poisson",
        "uniform_",
        "normal_",
        "bernoulli_",
        "random_",
        "exponential_",
        "geometric_",
        "cauchy_",
        "log_normal_",
        "trunc_normal_",
        "kaiming_uniform_",
        "kaiming_normal_",
        "xavier_uniform_",
        "xavier_normal_",
        "orthogonal_",
        "sparse_",
        "dropout",
        "dropout1d",
        "dropout2d",
        "dropout3d",
        "alpha_dropout",
        "feature_alpha_dropout",
        "rrelu",
        "gumbel_softmax",
    }
)


def _torch_patches() -> list[Patch]:
    torch = sys.modules["torch"]
    what = "torch.seed() seeds torch's global generator from the operating system"
    return [
        (torch, "manual_seed", _seeding(torch.manual_seed, "torch")),
        (torch, "seed", _watch(torch.seed, RANDOMNESS, what)),
    ]


@contextmanager
def _torch_mode(rec: Recorder) -> Iterator[None]:
    from torch.overrides import TorchFunctionMode

    class GlobalGeneratorDraws(TorchFunctionMode):
        def __torch_function__(
            self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None
        ) -> Any:
            kwargs = kwargs or {}
            name = getattr(func, "__name__", "")
            if name in TORCH_DRAWS and kwargs.get("generator") is None and "torch" not in rec.seeded:
                training = kwargs.get("training", args[2] if len(args) > 2 else True)
                if "dropout" not in name or training:
                    rec.note(
                        RANDOMNESS,
                        f"torch {name} draws from torch's global generator, not seeded in this task "
                        "(torch.manual_seed from ctx.rng)",
                        sys._getframe(1),
                        direct=False,
                    )
            return func(*args, **kwargs)

    with GlobalGeneratorDraws():
        yield


# ---------------------------------------------------------------------- network


def _install_audit_hook() -> None:
    global _HOOKED
    if _HOOKED:
        return

    def hook(event: str, args: tuple[Any, ...]) -> None:
        rec = _ACTIVE
        if rec is None or not event.startswith("socket."):
            return
        if rec.note(NETWORK, f"{event} reaches the network", sys._getframe(1), direct=False):
            raise PermissionError(f"no network for an algorithm task ({event}; consortia algorithm check)")

    sys.addaudithook(hook)
    _HOOKED = True
