"""`attnmt export RUN [RUN ...] --format web -o SITE`: the attention explorer as a static
site that decodes in the browser, with no server and no install (docs/export.md).

    site = build_site({"rnnsearch": "reference/rnnsearch-en-fr"}, "site", page=..., describe=...)
    # then: python -m http.server -d site   (or copy the folder to any static host)

SITE holds
  index.html          the explorer page of `attnmt serve` (attnmt/serve/explorer.html, its
                      assets inlined as the server inlines them) with the static site's
                      marker: the page then answers its API calls with a Web Worker
                      (web/worker.js) instead of HTTP;
  site.json           {"attnmt": version, "runtime": {name, version, module, wasm},
                      "limits": the server's defaults, "models": [{name, dir, info}]}, `info`
                      a model's ModelInfo exactly as `GET /api/models` of `attnmt serve EXPORT`
                      answers it (the caller's `describe`);
  models/NAME/        the model's ONNX export (a run is exported first, as `--format onnx`
                      does) and `tokenizer-src.json`, `tokenizer-tgt.json`: its
                      sentencepiece models as attnmt/web/sentencepiece.js reads them;
  web/*.js            the page's modules (attnmt/web: the worker and what it imports);
  ort/                onnxruntime-web's WASM build, one thread (`RUNTIME_FILES`).
Every request the page makes stays inside SITE: no CDN, nothing fetched from elsewhere.

onnxruntime-web comes from its npm tarball, fetched once from the registry, checked against
the recorded sha512 (`ORT_WEB_INTEGRITY`, what `npm view onnxruntime-web@1.30.0
dist.integrity` gives) and kept in the cache folder ($ATTNMT_CACHE, else
$XDG_CACHE_HOME/attnmt or ~/.cache/attnmt). Offline, the tarball put there by hand
(`npm pack onnxruntime-web@1.30.0`) is used as it is, once its hash is right.

The site is built in a temporary folder beside SITE and renamed into place: a failure
leaves SITE as it was. A non-empty SITE that is not an attnmt site (no site.json of ours)
is refused unless `force`; an attnmt site is rewritten whole.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import shutil
import tarfile
import tempfile
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from importlib.resources import files
from pathlib import Path
from typing import Any

from attnmt import __version__
from attnmt.data.parsed import CACHE_ENV, cache_root
from attnmt.errors import UserError
from attnmt.export.directory import replace_dir
from attnmt.export.web_tokenizer import tokenizer_json
from attnmt.rundir import RunDir

# onnxruntime-web 1.30.0: the release of onnxruntime-node 1.30.0 that tests/test_web_onnx.py
# checks the page's decoder with (npm has neither 1.31), so the page runs the kernels the
# parity tests measured. Its WASM backend is one build, SIMD with threads; without
# cross-origin isolation (the COOP/COEP headers static hosts do not send) it runs on one
# thread, which the worker asks for (numThreads = 1): no SharedArrayBuffer needed.
ORT_WEB_VERSION = "1.30.0"
ORT_WEB_INTEGRITY = "sha512-q0y+JrrtukXSzsBWEMccVfqX25LRmosXHF+CaRJmg8pZClzcV7svNc4rKY3jL02Vb7QmRMDs1SigqR4CXAfKYQ=="  # noqa: E501
ORT_WEB_TARBALL = f"onnxruntime-web-{ORT_WEB_VERSION}.tgz"
ORT_WEB_URL = f"https://registry.npmjs.org/onnxruntime-web/-/{ORT_WEB_TARBALL}"
# What the WASM backend loads, from the tarball's dist/: the ES module of the WASM-only
# build, the Emscripten glue it imports from `env.wasm.wasmPaths`, and the binary (14 MB;
# the asyncify, JSEP and JSPI builds are for WebGPU and WebNN, left out).
RUNTIME_MODULE = "ort.wasm.min.mjs"
RUNTIME_FILES = (RUNTIME_MODULE, "ort-wasm-simd-threaded.mjs", "ort-wasm-simd-threaded.wasm")

SITE_FILE = "site.json"
PAGE_FILE = "index.html"
WORKER = "worker.js"  # the page's decoder, in web/
# explorer.html's placeholder for the static site's marker (an HTML comment where served).
PAGE_MARK = "<!--@site@-->"
SITE_MARKER = '<script type="application/json" id="attnmt-site">{}</script>'
TOKENIZER_FILES = {"src": "tokenizer-src.json", "tgt": "tokenizer-tgt.json"}
MODEL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def cache_dir() -> Path:
    """Where the onnxruntime-web tarball is kept: attnmt's cache folder ($ATTNMT_CACHE,
    else attnmt/ under $XDG_CACHE_HOME or ~/.cache), as for parsed data."""
    return cache_root()


def _integrity(path: Path) -> str:
    digest = hashlib.sha512()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return "sha512-" + base64.b64encode(digest.digest()).decode("ascii")


def runtime_tarball(*, fetch: bool = True) -> Path:
    """The onnxruntime-web tarball in the cache, fetched from the npm registry on first use
    (to a temporary file, kept only once its hash is the recorded one).

    Raises:
        UserError: it is not cached and cannot be fetched (or `fetch` is off), or a file
        of the wrong hash is in its place.
    """
    path = cache_dir() / ORT_WEB_TARBALL
    fix = (
        f"put the tarball (`npm pack onnxruntime-web@{ORT_WEB_VERSION}`, or {ORT_WEB_URL}) at "
        f"{path} (${CACHE_ENV} moves the folder) and run again"
    )
    if not path.is_file():
        if not fetch:
            raise UserError(f"onnxruntime-web {ORT_WEB_VERSION} is not in the cache: {fix}")
        _download(path, fix)
    found = _integrity(path)
    if found != ORT_WEB_INTEGRITY:
        raise UserError(
            f"{path} has the hash {found[:24]}…, not onnxruntime-web {ORT_WEB_VERSION}'s "
            f"{ORT_WEB_INTEGRITY[:24]}…: delete it and run again to fetch it anew"
        )
    return path


def _download(path: Path, fix: str) -> None:
    print(f"fetching onnxruntime-web {ORT_WEB_VERSION} (33 MB, once) into {path.parent}/")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{ORT_WEB_TARBALL}.")
    except OSError as err:
        raise UserError(f"cannot write to the cache folder {path.parent} ({err}): {fix}") from None
    tmp = Path(name)
    try:
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(ORT_WEB_URL, timeout=60) as got:
            shutil.copyfileobj(got, out, 1 << 20)
        found = _integrity(tmp)
        if found != ORT_WEB_INTEGRITY:
            raise UserError(
                f"the download of {ORT_WEB_URL} has the hash {found[:24]}…, not the recorded "
                f"{ORT_WEB_INTEGRITY[:24]}…, so it was not kept: {fix}"
            )
        os.replace(tmp, path)
    except (OSError, urllib.error.URLError) as err:
        raise UserError(
            f"cannot fetch onnxruntime-web {ORT_WEB_VERSION} from the npm registry "
            f"({getattr(err, 'reason', None) or err}): {fix}"
        ) from None
    finally:
        tmp.unlink(missing_ok=True)


def write_runtime(folder: Path, tarball: Path) -> dict[str, str]:
    """`RUNTIME_FILES` from `tarball` into `folder`; site.json's "runtime" entry."""
    folder.mkdir(parents=True, exist_ok=True)
    with tarfile.open(tarball, "r:gz") as tar:
        for name in RUNTIME_FILES:
            member = tar.extractfile(f"package/dist/{name}")
            if member is None:  # the hash was right: cannot happen
                raise UserError(f"{tarball} has no dist/{name}")
            with member, (folder / name).open("wb") as out:
                shutil.copyfileobj(member, out, 1 << 20)
    return {
        "name": "onnxruntime-web",
        "version": ORT_WEB_VERSION,
        "module": f"{folder.name}/{RUNTIME_MODULE}",
        "wasm": f"{folder.name}/",
    }


def web_modules() -> Path:
    """The page's JavaScript modules (attnmt/web, package data)."""
    return Path(str(files("attnmt").joinpath("web")))


def static_page(page: str) -> str:
    """The explorer page (already inlined) as the static site's index.html: the marker that
    makes it answer its API calls with web/worker.js, reading site.json beside it."""
    if PAGE_MARK not in page:
        raise ValueError(f"the explorer page has no {PAGE_MARK} placeholder")
    marker = json.dumps({"site": SITE_FILE, "worker": f"web/{WORKER}"})
    return page.replace(PAGE_MARK, SITE_MARKER.format(marker))


def is_site(folder: str | Path) -> bool:
    """Whether `folder` holds a site this module wrote (its site.json says attnmt)."""
    try:
        data = json.loads((Path(folder) / SITE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and "attnmt" in data and "models" in data


def check_out(out: str | Path, *, force: bool = False) -> Path:
    """`out` if a site may be written there: new, empty, an attnmt site, or anything with
    `force`. UserError otherwise."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise UserError(f"'{out}' is a file; -o names the folder to write the site to")
    if out.is_dir() and any(out.iterdir()) and not is_site(out) and not force:
        raise UserError(
            f"'{out}' is not empty and is not an attnmt site (no {SITE_FILE} of ours): name a "
            "new folder, or use --force to replace it"
        )
    return out


def check_name(name: str) -> str:
    """A model's name, which is its folder in models/ and its name on the page."""
    if not MODEL_NAME.fullmatch(name):
        raise UserError(
            f"'{name}' cannot name a model folder of the site: use letters, digits, '.', '_' "
            "and '-' (NAME=RUN names it)"
        )
    return name


def check_export(export: Path) -> dict:
    """An export's attnmt.json, if the page can decode it: ONNX, sentencepiece."""
    info = json.loads((export / "attnmt.json").read_text(encoding="utf-8"))
    vocab = info.get("vocab") or {}
    if vocab.get("kind") != "sentencepiece":
        raise UserError(
            f"'{export}' tokenises by {vocab.get('kind') or 'an unknown kind'}; the site's page "
            "tokenises sentencepiece models only (the corpora's runs, not the synthetic tasks'): "
            "serve it with `attnmt serve` instead"
        )
    return info


def write_model(export: Path, folder: Path) -> None:
    """The export's files into `folder` (a new folder) and its two tokenizer JSONs."""
    info = check_export(export)
    if folder.resolve() != export.resolve():
        shutil.copytree(
            export,
            folder,
            copy_function=shutil.copyfile,  # the folder's permissions, not the run's 0600
            ignore=lambda _dir, names: [n for n in names if n.startswith(".")],
        )
        published = _without_local_paths(info)
        text = json.dumps(published, ensure_ascii=False, indent=1) + "\n"
        (folder / "attnmt.json").write_text(text, encoding="utf-8")
    vocab = info["vocab"]["files"]
    sides = vocab * 2 if info["vocab"]["joint"] else vocab  # joint: one model, both sides
    for side, name in zip(("src", "tgt"), sides, strict=True):
        data = tokenizer_json(export / name)
        text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
        (folder / TOKENIZER_FILES[side]).write_text(text, encoding="utf-8")


def _without_local_paths(info: dict) -> dict:
    """attnmt.json as a published site shows it: the folders of the machine it was made on
    (the run's, its data files', its cache's) reduced to their last names."""
    info = json.loads(json.dumps(info))  # a deep copy
    info["run_dir"] = Path(str(info.get("run_dir", ""))).name
    config = info.get("run_config", {})
    train, data = config.get("train", {}), config.get("data", {})
    if train.get("run_dir"):
        train["run_dir"] = Path(train["run_dir"]).name
    for key, value in data.items():
        if (key.endswith("_path") or key == "cache_dir") and isinstance(value, str) and value:
            data[key] = Path(value).name
    return info


def write_web(folder: Path) -> None:
    """The page's modules into `folder`: every attnmt/web/*.js (the worker and what it
    imports)."""
    source = web_modules()
    folder.mkdir(parents=True, exist_ok=True)
    for path in sorted(source.glob("*.js")):
        shutil.copyfile(path, folder / path.name)


def build_site(
    sources: Mapping[str, str | Path],
    out: str | Path,
    *,
    page: str,
    describe: Callable[[str, Path], dict],
    limits: dict[str, Any],
    export_run: Callable[[str, Path], None] | None = None,
    force: bool = False,
) -> Path:
    """Write the static site `out` for `sources` (name -> an ONNX export, or a run that
    `export_run(run, folder)` exports into `folder`).

    `page` is the explorer page, assets inlined; `describe(name, model_folder)` the model's
    ModelInfo as JSON (the server's); `limits` the server's defaults (site.json "limits").

    Raises:
        UserError: `out` in the way, a bad name, a model the page cannot decode, a run
        given without `export_run`, or onnxruntime-web that cannot be had.
    """
    out = check_out(out, force=force)
    for name in sources:
        check_name(name)
    for path in sources.values():
        if RunDir(path).export_format == "onnx":
            check_export(Path(path))
        elif export_run is None:
            raise UserError(f"'{path}' is not an ONNX export (attnmt export RUN --format onnx)")
    if not (web_modules() / WORKER).is_file():
        raise UserError(
            f"this install of attnmt has no {web_modules() / WORKER}, the page's decoder: "
            "reinstall attnmt (`pip install --force-reinstall attnmt`)"
        )
    tarball = runtime_tarball()  # before minutes of exporting: offline, say so at once
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp"))
    try:
        models = []
        for name, path in sources.items():
            folder = tmp / "models" / name
            folder.parent.mkdir(parents=True, exist_ok=True)
            if RunDir(path).export_format == "onnx":
                write_model(Path(path), folder)
            else:
                assert export_run is not None
                export_run(str(path), folder)
                write_model(folder, folder)
            models.append({"name": name, "dir": f"models/{name}/", "info": describe(name, folder)})
        site = {
            "attnmt": __version__,
            "runtime": write_runtime(tmp / "ort", tarball),
            "limits": limits,
            "models": models,
        }
        write_web(tmp / "web")
        (tmp / SITE_FILE).write_text(json.dumps(site, indent=1) + "\n", encoding="utf-8")
        (tmp / PAGE_FILE).write_text(static_page(page), encoding="utf-8")
        replace_dir(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def site_sizes(site: str | Path) -> dict[str, int]:
    """Bytes of each part of a site: each model folder, the runtime, the rest."""
    site = Path(site)
    sizes: dict[str, int] = {}
    for path in site.rglob("*"):
        if not path.is_file():
            continue
        parts = path.relative_to(site).parts
        key = "/".join(parts[:2]) if parts[0] == "models" and len(parts) > 2 else parts[0]
        key = key if key in ("ort", "web") or key.startswith("models/") else "page"
        sizes[key] = sizes.get(key, 0) + path.stat().st_size
    return sizes
