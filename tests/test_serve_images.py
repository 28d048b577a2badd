"""`attnmt serve` with runs that read images: what /api/model says of them, /api/read's
digits and pixel maps checked against the library's own decoding and `pixel_map`, the
glimpse path, the test canvases of /api/examples, and every refusal."""

from __future__ import annotations

import numpy as np
import pytest
from fastapi.testclient import TestClient

from attnmt.data import prepare
from attnmt.data.images import canvas_text
from attnmt.decoding.runs import load_run
from attnmt.decoding.translator import Translator
from attnmt.evaluation.vision import glimpse_path, pixel_map, split_canvases
from attnmt.serve import RunDecoder, Settings, create_app
from attnmt.serve.images import MAX_DIGITS

ROUNDING = 5e-6  # the answers' weights have 5 decimals


def make_app(tiny_runs, tiny_image_runs, **settings):
    """The text run "rnn" first, then the four image runs."""
    options = Settings(**settings)
    runs = {"rnn": tiny_runs["rnn"], **tiny_image_runs}
    decoders = {name: RunDecoder(name, load_run(path), options) for name, path in runs.items()}
    return create_app(decoders, options)


@pytest.fixture(scope="module")
def client(tiny_runs, tiny_image_runs):
    with TestClient(make_app(tiny_runs, tiny_image_runs)) as client:
        yield client


def example(client, model, index=0):
    answer = client.get("/api/examples", params={"model": model, "n": 1, "start": index})
    assert answer.status_code == 200, answer.text
    return answer.json()["examples"][0]


def read(client, **body):
    return client.post("/api/read", json=body)


def library_reading(run_dir, pixels):
    """The library's decoding of one image: (the sentence, its maps (T, H, W))."""
    loaded = load_run(run_dir)
    translator = Translator(loaded, need_weights=True, max_len=MAX_DIGITS + 1)
    (sentence,) = translator.translate([canvas_text(np.asarray(pixels))])
    weights = sentence.translation.weights.numpy()  # (T, G) or (T, H·W)
    return sentence, pixel_map(weights, *np.asarray(pixels).shape)


# --- what a run reads ---------------------------------------------------------------------


def test_model_info_says_what_each_run_reads(client):
    models = {m["name"]: m for m in client.get("/api/models").json()["models"]}
    assert models["rnn"]["input"] == "text" and models["rnn"]["image"] is None
    soft = models["soft"]
    assert soft["input"] == "image" and soft["model"] == "show-attend-tell"
    assert soft["image"] == {
        "task": "digits",
        "height": 24,
        "width": 64,
        "min_level": 0,
        "max_level": 16,
        "grid": [6, 16],
        "cell": 4,
        "glimpses": None,
        "max_digits": MAX_DIGITS,
        "examples": 8,
    }
    assert soft["attention"]["mode"] == "soft" and models["hard"]["attention"]["mode"] == "hard"
    assert soft["source_language"] == "digits images" and soft["target_language"] == "digits"
    glimpses = models["glimpses"]
    assert glimpses["has_attention"] and glimpses["attention"] is None
    assert (glimpses["image"]["height"], glimpses["image"]["width"]) == (40, 40)
    assert glimpses["image"]["glimpses"] == 6 and glimpses["image"]["grid"] is None
    assert models["plain"]["has_attention"] is False and models["plain"]["attention"] is None


# --- reading ------------------------------------------------------------------------------


def test_soft_attention_as_pixel_maps_the_library_gives(client, tiny_image_runs):
    shown = example(client, "soft", 2)
    answer = read(client, image=shown["image"], model="soft")
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["model"] == "soft" and body["beam"] == 1
    (reading,) = body["readings"]
    sentence, maps = library_reading(tiny_image_runs["soft"], shown["image"])
    assert reading["image"] == 1 and reading["text"] == sentence.translation.text
    assert reading["target_pieces"][-1] == "</s>"
    assert reading["target_pieces"][:-1] == reading["text"].split()
    assert reading["glimpses"] is None
    got = np.array(reading["attention"])
    assert got.shape == (len(reading["target_pieces"]), 24, 64) == maps.shape
    np.testing.assert_allclose(got, maps, atol=ROUNDING)
    # Each map holds its step's mass (1: a softmax over the 6x16 cells), a cell's weight
    # shared by its 4x4 pixels.
    masses = sentence.translation.weights.sum(-1).numpy()
    np.testing.assert_allclose(got.sum(axis=(1, 2)), masses, atol=24 * 64 * ROUNDING)
    np.testing.assert_allclose(masses, 1.0, atol=1e-5)
    cells = sentence.translation.weights.numpy().reshape(-1, 6, 16)
    cell = np.broadcast_to(cells[:, 1:2, 2:3] / 16, (len(cells), 4, 4))  # row 1, column 2
    np.testing.assert_allclose(got[:, 4:8, 8:12], cell, atol=ROUNDING)
    # An untrained reader does not stop: it is cut at max_digits, and says so.
    assert reading["truncated"] == (len(reading["target_pieces"]) - 1 >= MAX_DIGITS)
    assert len(reading["target_pieces"]) <= MAX_DIGITS + 1


def test_hard_attention_looks_at_one_cell_a_step(client):
    (reading,) = read(client, image=example(client, "hard")["image"], model="hard").json()[
        "readings"
    ]
    for step in np.array(reading["attention"]):  # (H, W)
        looked = np.argwhere(step > 0)
        assert len(looked) == 16 and np.allclose(step[step > 0], 1 / 16)
        top, left = looked.min(axis=0)
        assert top % 4 == 0 and left % 4 == 0 and (looked.max(axis=0) == [top + 3, left + 3]).all()


def test_glimpses_give_their_path_and_their_map(client, tiny_image_runs):
    shown = example(client, "glimpses", 1)
    (reading,) = read(client, image=shown["image"], model="glimpses").json()["readings"]
    path = np.array(reading["glimpses"])
    assert path.shape == (6, 2)  # one (row, col) per glimpse: model.glimpses
    sentence, maps = library_reading(tiny_image_runs["glimpses"], shown["image"])
    loaded = load_run(tiny_image_runs["glimpses"])
    np.testing.assert_allclose(path, glimpse_path(loaded.model, sentence.ids), atol=0.005)
    assert (path >= -0.5).all() and (path <= 39.5).all()
    got = np.array(reading["attention"])  # the same map at each step: the label, then EOS
    assert got.shape == (2, 40, 40) == maps.shape and len(reading["target_pieces"]) == 2
    np.testing.assert_allclose(got, maps, atol=ROUNDING)
    np.testing.assert_allclose(got.sum(axis=(1, 2)), 1.0, atol=40 * 40 * ROUNDING)


def test_a_run_without_attention_reads_without_maps(client):
    image = example(client, "plain")["image"]
    (reading,) = read(client, image=image, model="plain").json()["readings"]
    assert reading["text"] and reading["attention"] is None and reading["glimpses"] is None
    refused = read(client, image=image, model="plain", weights=True)
    assert refused.status_code == 422 and "has no attention" in refused.json()["detail"]
    (quiet,) = read(client, image=image, model="soft", weights=False).json()["readings"]
    assert quiet["attention"] is None and quiet["text"]


def test_several_images_keep_their_order(client):
    images = [example(client, "soft", i)["image"] for i in (0, 1, 2)]
    together = read(client, images=images, model="soft", beam=2).json()
    assert together["beam"] == 2
    assert [r["image"] for r in together["readings"]] == [1, 2, 3]
    alone = [read(client, image=x, model="soft", beam=2).json()["readings"][0] for x in images]
    assert [r["text"] for r in together["readings"]] == [r["text"] for r in alone]
    np.testing.assert_allclose(
        np.array(together["readings"][2]["attention"]), np.array(alone[2]["attention"]), atol=1e-4
    )


# --- the test canvases ---------------------------------------------------------------------


def test_examples_are_the_runs_test_split(client, tiny_image_runs):
    answer = client.get("/api/examples", params={"model": "soft", "n": 3, "start": 2}).json()
    assert answer["model"] == "soft" and answer["split"] == "test" and answer["total"] == 8
    loaded = load_run(tiny_image_runs["soft"])
    canvases = split_canvases(loaded.cfg.data, "test")
    prepared = prepare(loaded.cfg.data).test  # what the run is evaluated on
    assert [e["index"] for e in answer["examples"]] == [2, 3, 4]
    for shown in answer["examples"]:
        i = shown["index"]
        assert shown["id"] == f"digits.test:{i}"
        assert shown["digits"] == " ".join(map(str, canvases[i].digits)) == prepared[i].tgt
        assert canvas_text(np.array(shown["image"])) == prepared[i].src
        assert [tuple(b) for b in shown["boxes"]] == canvases[i].boxes
    default = client.get("/api/examples", params={"model": "glimpses"}).json()
    assert len(default["examples"]) == 4 and len(default["examples"][0]["image"]) == 40
    last = client.get("/api/examples", params={"model": "soft", "n": 5, "start": 6}).json()
    assert [e["index"] for e in last["examples"]] == [6, 7]  # the split ends there


# --- refusals: each one sentence, and the server stays up ----------------------------------


@pytest.mark.parametrize(
    ("body", "field", "needle"),
    [
        ({"image": [[0, 1], [2]]}, "image", "row 1 of the image has 1 pixels but row 0 has 2"),
        ({"image": [[0, 17]]}, "image", "holds 17 at row 0, column 1"),
        ({"image": [[0, 2.5]]}, "image", "holds 2.5 at row 0, column 1"),
        ({"image": [[True]]}, "image", "holds true at row 0, column 0"),
        ({"image": [["a"]]}, "image", 'holds "a" at row 0, column 0'),
        ({"image": []}, "image", "must be a non-empty list of rows"),
        ({"image": [[]]}, "image", "row 0 of the image is not a non-empty list"),
        ({"image": "0000"}, "image", "must be a non-empty list of rows"),
        ({"images": [[[1]], [[-1]]]}, "images", "image 1 (from 0) holds -1"),
        ({"images": [[[0]]], "image": [[0]]}, "body", "exactly one of 'image' or 'images'"),
        ({}, "body", "exactly one of 'image' or 'images'"),
        ({"image": [[0]], "beam": 0}, "beam", "greater than or equal to 1"),
        ({"image": [[0]], "text": "x"}, "text", "Extra inputs are not permitted"),
    ],
)
def test_bad_images_are_named_in_one_sentence(client, body, field, needle):
    answer = read(client, **body)
    assert answer.status_code == 422, answer.text
    errors = answer.json()["errors"]
    assert [e["field"] for e in errors] == [field], errors
    assert needle in errors[0]["message"] and answer.json()["detail"].startswith(f"{field}: ")


def test_an_image_of_another_size_is_refused_with_both_sizes(client):
    small = read(client, image=[[0] * 40] * 40, model="soft")
    assert small.status_code == 422
    assert small.json()["detail"] == (
        "the image is 40x40 pixels (height x width); this model reads 24x64 images"
    )
    several = read(client, images=[[[0] * 40] * 40, [[0] * 40] * 39], model="glimpses")
    assert several.status_code == 422 and "image 1 (from 0) is 39x40" in several.json()["detail"]


def test_text_and_images_each_go_to_their_own_route(client):
    text = client.post("/api/translate", json={"text": "the cat", "model": "soft"})
    assert text.status_code == 422
    assert "reads images, not text" in text.json()["detail"]
    assert "POST /api/read" in text.json()["detail"] and "24 rows of 64" in text.json()["detail"]
    image = read(client, image=[[0]], model="rnn")  # the text run
    assert image.status_code == 422 and "reads text, not images" in image.json()["detail"]
    examples = client.get("/api/examples", params={"model": "rnn"})
    assert examples.status_code == 422 and "reads text" in examples.json()["detail"]
    assert read(client, image=[[0]], model="nope").status_code == 404
    assert client.get("/api/health").status_code == 200


@pytest.mark.parametrize(
    ("params", "needle"),
    [
        ({"model": "soft", "n": 0}, "query.n"),
        ({"model": "soft", "n": 33}, "query.n"),
        ({"model": "soft", "start": -1}, "query.start"),
        ({"model": "soft", "start": 8}, "past the last of the 8 test canvases"),
    ],
)
def test_bad_example_queries(client, params, needle):
    answer = client.get("/api/examples", params=params)
    assert answer.status_code == 422 and needle in answer.json()["detail"]


def test_limits_and_the_key_hold_for_images(tiny_runs, tiny_image_runs):
    app = make_app(tiny_runs, tiny_image_runs, max_lines=2, api_key="s3cret")
    key = {"X-API-Key": "s3cret"}
    with TestClient(app) as keyed:
        assert keyed.get("/api/examples", params={"model": "soft"}).status_code == 401
        image = keyed.get("/api/examples", params={"model": "soft"}, headers=key).json()
        image = image["examples"][0]["image"]
        assert keyed.post("/api/read", json={"image": image, "model": "soft"}).status_code == 401
        body = {"images": [image] * 3, "model": "soft"}
        many = keyed.post("/api/read", json=body, headers=key)
        assert many.status_code == 413 and "3 images" in many.json()["detail"]
        assert "at most 2" in many.json()["detail"]
        body["images"] = body["images"][:2]
        assert keyed.post("/api/read", json=body, headers=key).status_code == 200


def test_openapi_types_the_image_routes(client):
    schema = client.get("/openapi.json").json()
    request = schema["components"]["schemas"]["ReadRequest"]
    assert request["additionalProperties"] is False
    fields = {"image", "images", "model", "beam", "weights", "explain", "ig_steps"}
    assert set(request["properties"]) == fields
    read_post = schema["paths"]["/api/read"]["post"]["responses"]
    assert read_post["200"]["content"]["application/json"]["schema"]["$ref"].endswith(
        "/ReadResponse"
    )
    assert "/api/examples" in schema["paths"]
    info = schema["components"]["schemas"]["ModelInfo"]["properties"]
    assert {"input", "image"} <= set(info)
