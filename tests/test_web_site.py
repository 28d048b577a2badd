"""`attnmt export RUN_OR_EXPORT ... --format web -o SITE`: what the static site holds (the
page in static mode, site.json with each model's ModelInfo as `attnmt serve EXPORT` answers
it, the models' exports and tokenizers, the page's modules, onnxruntime-web's WASM build)
and what it refuses (a folder that is not a site, image and symbol runs, a runtime that
cannot be had) without losing what was there. tests/test_web_site_browser.py drives the
site in Chromium.

onnxruntime-web's tarball comes from the npm registry once, into the user's cache
(attnmt.export.web.cache_dir); without it and without the registry the site tests skip,
saying so.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

import attnmt.export.web as web
from attnmt.cli import main
from attnmt.errors import UserError
from attnmt.export.web_tokenizer import tokenizer_json


@pytest.fixture(scope="session")
def ort_web() -> Path:
    """onnxruntime-web's tarball, checked (fetched into the cache on first use)."""
    try:
        return web.runtime_tarball()
    except UserError as err:
        pytest.skip(f"onnxruntime-web cannot be had here, so no site can be built: {err}")


def export_site(out: Path, *sources: str) -> int:
    """`attnmt export SOURCES --format web -o OUT` in this process."""
    return main(["export", *sources, "--format", "web", "-o", str(out)])


@pytest.fixture(scope="module")
def site(ort_web, tiny_exports, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("web-site") / "site"
    assert export_site(out, f"rnn={tiny_exports['rnn']}", f"tf={tiny_exports['tf']}") == 0
    return out


def test_the_site_holds_the_page_the_models_and_the_runtime(site, tiny_exports):
    listing = {p.relative_to(site).as_posix() for p in site.rglob("*") if p.is_file()}
    assert {"index.html", "site.json", "web/worker.js", "web/translate.js"} <= listing
    assert {f"ort/{name}" for name in web.RUNTIME_FILES} == {
        p for p in listing if p.startswith("ort/")
    }
    data = json.loads((site / "site.json").read_text(encoding="utf-8"))
    assert data["runtime"] == {
        "name": "onnxruntime-web",
        "version": web.ORT_WEB_VERSION,
        "module": "ort/ort.wasm.min.mjs",
        "wasm": "ort/",
    }
    assert [m["name"] for m in data["models"]] == ["rnn", "tf"]
    for model in data["models"]:
        folder = site / model["dir"]
        export = tiny_exports[model["name"]]
        for path in export.rglob("*"):
            if path.is_file() and path.name != "attnmt.json":
                assert (folder / path.relative_to(export)).read_bytes() == path.read_bytes()
        # attnmt.json as published: the same, but no folder of the machine it was made on
        info = json.loads((export / "attnmt.json").read_text(encoding="utf-8"))
        shown = json.loads((folder / "attnmt.json").read_text(encoding="utf-8"))
        machine = str(Path(info["run_dir"]).parent)  # the folder the run was trained in
        assert machine in json.dumps(info) and machine not in json.dumps(shown)
        assert (
            shown["run_config"]["train"]["run_dir"]
            == Path(info["run_config"]["train"]["run_dir"]).name
        )
        for key in ("run_dir", "run_config"):
            info.pop(key), shown.pop(key)
        assert shown == info
        joint = export / "vocab" / "joint.model"
        for side in ("src", "tgt"):
            written = json.loads((folder / f"tokenizer-{side}.json").read_text(encoding="utf-8"))
            assert written == json.loads(json.dumps(tokenizer_json(joint)))
    page = (site / "index.html").read_text(encoding="utf-8")
    assert '<script type="application/json" id="attnmt-site">' in page
    assert "/*@" not in page and web.PAGE_MARK not in page  # every asset inlined
    # Nothing loaded from elsewhere (the browser test records every request made)
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page)
    for path in (site / "web").glob("*.js"):
        text = path.read_text(encoding="utf-8")
        imports = re.findall(r"""^(?:import|export)\b[^;=]*?from\s*["']([^"']+)""", text, re.M)
        assert all(name.startswith("./") for name in imports), (path.name, imports)


def test_each_model_is_described_as_attnmt_serve_describes_its_export(site, tiny_exports):
    """site.json's `info` is GET /api/models of `attnmt serve rnn=EXPORT tf=EXPORT`."""
    from fastapi.testclient import TestClient

    from attnmt.cli.serve import add_arguments, build

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args([f"rnn={tiny_exports['rnn']}", f"tf={tiny_exports['tf']}"])
    app, _, settings = build(args)
    with TestClient(app) as client:
        served = client.get("/api/models").json()["models"]
    data = json.loads((site / "site.json").read_text(encoding="utf-8"))
    assert [m["info"] for m in data["models"]] == served
    assert data["limits"]["max_line_chars"] == settings.max_line_chars
    assert data["limits"]["beam"] == settings.beam


def test_a_site_is_rewritten_and_another_folder_is_refused(site, tiny_exports, tmp_path, capsys):
    copy = tmp_path / "again"
    shutil.copytree(site, copy)
    (copy / "stale.txt").write_text("from before", encoding="utf-8")
    assert export_site(copy, f"plain={tiny_exports['plain']}") == 0
    assert not (copy / "stale.txt").exists()  # rewritten whole
    data = json.loads((copy / "site.json").read_text(encoding="utf-8"))
    assert [m["name"] for m in data["models"]] == ["plain"]
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me", encoding="utf-8")
    capsys.readouterr()
    assert export_site(mine, str(tiny_exports["plain"])) == 2
    err = capsys.readouterr().err.strip()
    assert "is not empty and is not an attnmt site" in err and len(err.splitlines()) == 1
    assert [p.name for p in mine.iterdir()] == ["notes.txt"]
    assert (mine / "notes.txt").read_text(encoding="utf-8") == "keep me"


def test_runtime_that_cannot_be_fetched_names_where_to_put_it(monkeypatch, tmp_path):
    monkeypatch.setenv(web.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setattr(web, "ORT_WEB_URL", "http://127.0.0.1:9/onnxruntime-web.tgz")
    with pytest.raises(UserError) as caught:
        web.runtime_tarball()
    message = str(caught.value)
    assert "cannot fetch onnxruntime-web" in message
    assert str(tmp_path / "cache" / web.ORT_WEB_TARBALL) in message
    assert not any((tmp_path / "cache").iterdir())  # no half download left
    (tmp_path / "cache" / web.ORT_WEB_TARBALL).write_bytes(b"not the tarball")
    with pytest.raises(UserError, match="delete it and run again"):
        web.runtime_tarball()


def test_the_cli_refuses_offline_before_writing(monkeypatch, tmp_path, tiny_exports, capsys):
    monkeypatch.setenv(web.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setattr(web, "ORT_WEB_URL", "http://127.0.0.1:9/onnxruntime-web.tgz")
    assert export_site(tmp_path / "site", str(tiny_exports["rnn"])) == 2
    assert "cannot fetch onnxruntime-web" in capsys.readouterr().err
    assert not (tmp_path / "site").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


@pytest.mark.parametrize(
    ("kind", "said"),
    [("image", "reads images (show-attend-tell)"), ("symbols", "tokenises by symbols")],
)
def test_image_and_symbol_runs_are_refused_in_one_sentence(
    monkeypatch, tmp_path, capsys, kind, said
):
    import attnmt.cli.export_web as cli_web

    loaded = SimpleNamespace(
        run_dir=tmp_path / "run",
        model=SimpleNamespace(reads_images=kind == "image"),
        cfg=SimpleNamespace(model=SimpleNamespace(name="show-attend-tell")),
    )
    monkeypatch.setattr(cli_web, "load_run", lambda path, device: loaded)
    monkeypatch.setattr(cli_web, "vocab_info", lambda _loaded: {"kind": kind})
    assert export_site(tmp_path / "site", str(tmp_path / "run")) == 2
    err = capsys.readouterr().err.strip()
    assert said in err and len(err.splitlines()) == 1
    assert not (tmp_path / "site").exists()


def test_onnx_and_ctranslate2_take_one_run(capsys):
    assert main(["export", "runs/a", "runs/b", "--format", "onnx"]) == 2
    assert "exports one run at a time" in capsys.readouterr().err
