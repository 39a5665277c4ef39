"""The real fixtures' conversion cache (eagle3_check/gguf_fixture.py), with a stand-in converter:
converted once, then read; two processes at once convert once; the sha256 and the packages are
checked with one-line errors. The real conversion runs in tests/fixtures/test_real_fixtures.py."""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import time

import pytest

from eagle3_check import gguf_fixture
from eagle3_check.errors import InputError
from eagle3_check.fixtures.registry import list_fixtures, load_fixture

DATA = b"GGUF stand-in bytes"


@pytest.fixture
def fake(tmp_path, monkeypatch):
    """A package `fake_gguf_pkg` holding two chunks of DATA, a cache under tmp_path, and a converter
    that writes target/config.json and counts its calls in a file (shared by forked processes)."""
    pkg = tmp_path / "site" / "fake_gguf_pkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("raise ImportError('never imported: found by find_spec')\n")
    (pkg / "a.part").write_bytes(DATA[:7])
    (pkg / "b.part").write_bytes(DATA[7:])
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.setenv("EAGLE3_CHECK_CACHE", str(tmp_path / "cache"))
    calls = tmp_path / "calls.txt"

    def convert(name, gguf_file, out, steps):
        assert gguf_file.read_bytes() == DATA  # the chunks, concatenated in order
        with open(calls, "a") as f:
            f.write(name + "\n")
        time.sleep(0.3)  # long enough for a second process to arrive meanwhile
        (out / "target").mkdir()
        (out / "target" / "config.json").write_text("{}")
        return {"converter": "stand-in"}

    monkeypatch.setattr(gguf_fixture, "_convert", convert)
    source = {"packages": ["fake-gguf-pkg"], "files": [["fake_gguf_pkg", "a.part"], ["fake_gguf_pkg", "b.part"]],
              "sha256": hashlib.sha256(DATA).hexdigest()}
    return source, calls


def test_a_second_use_does_not_convert_again(fake):
    source, calls = fake
    before = gguf_fixture.conversions
    first = gguf_fixture.converted_dir("fx", source)
    second = gguf_fixture.converted_dir("fx", source)
    assert first == second and (first / "target" / "config.json").is_file()
    assert calls.read_text().splitlines() == ["fx"] and gguf_fixture.conversions == before + 1
    record = json.loads((first / gguf_fixture.DONE).read_text())
    assert record["sha256"] == source["sha256"] and record["converter"] == "stand-in"
    assert not [p for p in first.parent.iterdir() if p.is_dir() and p != first]  # no temp directory left
    assert first.name == f"fx-{source['sha256'][:16]}-v{gguf_fixture.CONVERSION}"


def _use(args):
    name, source = args
    return str(gguf_fixture.converted_dir(name, source))


def test_two_processes_at_once_convert_once(fake):
    source, calls = fake
    with multiprocessing.get_context("fork").Pool(2) as pool:
        dirs = pool.map(_use, [("fx", source), ("fx", source)])
    assert dirs[0] == dirs[1] and calls.read_text().splitlines() == ["fx"]


def test_a_failed_conversion_leaves_nothing_half_built(fake, monkeypatch):
    source, _ = fake

    def broken(name, gguf_file, out, steps):
        (out / "target").mkdir()
        raise InputError("stand-in failure", "a conversion", "none")

    monkeypatch.setattr(gguf_fixture, "_convert", broken)
    with pytest.raises(InputError, match="stand-in failure"):
        gguf_fixture.converted_dir("fx", source)
    root = gguf_fixture.cache_root()
    assert [p.name for p in root.iterdir() if not p.name.endswith(".lock")] == []


def test_a_wrong_sha256_is_a_one_line_error(fake):
    source, calls = fake
    with pytest.raises(InputError) as e:
        gguf_fixture.converted_dir("fx", {**source, "sha256": "0" * 64})
    assert "sha256" in str(e.value) and "\n" not in str(e.value) and not calls.exists()


def test_a_missing_package_names_the_install_command(fake):
    source, _ = fake
    with pytest.raises(InputError) as e:
        gguf_fixture.converted_dir("fx", {**source, "files": [["no_such_gguf_pkg_xyz", "m.gguf"]]})
    msg = str(e.value)
    assert "fake-gguf-pkg is not installed" in msg and 'pip install -e ".[real]"' in msg and "\n" not in msg


@pytest.mark.parametrize("bad", [{"files": []}, {"sha256": "abc"}, {"extra": 1}, {"packages": "x"}],
                         ids=["no-files", "short-sha", "unknown-key", "packages-not-list"])
def test_a_bad_source_block_is_a_one_line_error(tmp_path, bad):
    good = {"packages": ["p"], "files": [["m", "f"]], "sha256": "0" * 64}
    with pytest.raises(InputError, match="source = "):
        gguf_fixture.check_source({**good, **bad}, tmp_path / "fixture.json")


def test_the_real_fixtures_are_listed_without_converting(monkeypatch, tmp_path):
    monkeypatch.setenv("EAGLE3_CHECK_CACHE", str(tmp_path / "never"))
    names = list_fixtures()
    assert {"smollm2-135m", "gemma3-270m"} <= set(names)
    assert not {"smollm2-135m", "gemma3-270m"} & set(list_fixtures(real=False))
    for name in ("smollm2-135m", "gemma3-270m"):
        fx = load_fixture(name)
        assert fx.real and fx.prompts_path.name == "heldout.json" and len(fx.prompts()) >= 16
        assert fx.draft_dir == fx.root / "draft"
    assert not (tmp_path / "never").exists()  # loading, prompts and the draft path convert nothing


def test_a_conversion_parses_each_gguf_once_and_restores_gguf(tmp_path):
    """transformers opens the GGUF three times a conversion (config, tensors, tokenizer) and builds a
    tensor name map per submodule: inside `_gguf_read_once` one reader per file (however the path is
    spelled) and one map per (arch, blocks); gguf's own names are back afterwards, also after an error."""
    import types

    made = []

    class Reader:
        def __init__(self, path, mode="r"):
            made.append(("reader", str(path), mode))

    def name_map(arch, n_blocks):
        made.append(("map", arch, n_blocks))
        return object()

    fake = types.SimpleNamespace(GGUFReader=Reader, get_tensor_name_map=name_map)
    f = tmp_path / "m.gguf"
    f.write_bytes(b"")
    with gguf_fixture._gguf_read_once(fake):
        first = fake.GGUFReader(f)
        assert fake.GGUFReader(str(f)) is first and fake.GGUFReader(tmp_path / "." / "m.gguf") is first
        assert fake.GGUFReader(f, "r+") is not first  # another mode: another reader
        m = fake.get_tensor_name_map("llama", 30)
        assert fake.get_tensor_name_map("llama", 30) is m and fake.get_tensor_name_map("llama", 2) is not m
    assert made == [("reader", str(f), "r"), ("reader", str(f), "r+"), ("map", "llama", 30), ("map", "llama", 2)]
    assert fake.GGUFReader is Reader and fake.get_tensor_name_map is name_map
    with pytest.raises(RuntimeError), gguf_fixture._gguf_read_once(fake):
        raise RuntimeError("a conversion that fails")
    assert fake.GGUFReader is Reader and fake.get_tensor_name_map is name_map
