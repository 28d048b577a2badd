"""`attnmt serve`'s HTTP API fuzzed from its own OpenAPI schema, with schemathesis.

    python benchmarks/fuzz_api.py                     # `make fuzz`: tiny runs, 200 examples
    python benchmarks/fuzz_api.py --examples 50 --seed 7

Trains tiny runs from the shipped configs (seconds; benchmarks/work/fuzz_api/) and serves
them in-process twice: a text run first and no key, then an image run first behind an API
key. Against each, schemathesis runs what `st run` runs, from the schema the server
publishes: its examples, its coverage cases (each field missing, null, of the wrong type,
at and past its bounds; unexpected methods and content types) and Hypothesis fuzzing of
valid and invalid bodies (odd Unicode, huge numbers, extra fields), up to `--examples`
per route and mode. Every answer goes through every check that fits (no 500; status code,
content type, headers and body as documented; invalid bodies refused; auth not ignored)
and two of ours: a body generated as valid is never refused by validation, and after
every request the server still answers GET /api/health with an empty queue. Then images
of each run's size (which the schema cannot say) are read, `--examples` of them.

Writes the figures (requests by route and status code, failures, seconds, the CPU) to
benchmarks/results/fuzz_api.json; exit status 1 when anything failed. tests/test_serve_fuzz.py
runs the same with a few examples.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

import hypothesis
import jsonschema_rs
import schemathesis
import torch
from hypothesis import strategies as st
from schemathesis import engine
from schemathesis.engine import events
from schemathesis.python.asgi import get_client

from attnmt.config import load_config
from attnmt.decoding.runs import load_run
from attnmt.devices import cpu_model
from attnmt.rundir import RunDir
from attnmt.serve import RunDecoder, Settings, create_app
from attnmt.serve.validation import RAGGED
from attnmt.training import train

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "fuzz_api.json"
KEY = "fuzz-key"
AT_SIZE = "POST /api/read (images at size)"
# Each shipped config, shrunk to train in seconds: name -> (config, overrides).
TINY = ["model.embed_size=8", "model.hidden_size=16", "train.max_steps=2"]
TINY += ["train.log_every=1000", "train.validate_every=1000", "train.checkpoint_every=1000"]
TINY += ["train.valid_sentences=1", "train.valid_examples=0", "data.synthetic_dev_size=8"]
REVERSE = ["data.synthetic_train_size=64", "data.batch_tokens=256"]
RUNS = {
    "rnn": ("reverse", REVERSE),
    "tf": ("reverse", [*REVERSE, "model.name=transformer", "model.heads=2", "model.ff_size=32"]),
    "plain": ("reverse", [*REVERSE, "model.name=rnnencdec"]),
    "soft": ("captions-soft", ["data.synthetic_train_size=16", "data.batch_tokens=12296"]),
    "glimpses": ("glimpses", ["data.synthetic_train_size=16", "data.batch_tokens=12808"]),
}
# Two servers: which runs, in which order (the first is the default), and the key.
SERVERS = {
    "text": (["rnn", "tf", "plain", "soft"], None),
    "image": (["soft", "glimpses", "rnn"], KEY),
}


@schemathesis.check
def validated_as_published(ctx, response, case):
    """A JSON body the published schema calls valid is never refused by validation (a 422
    that lists `errors`): that would be the schema promising what the validators refuse.
    Judged by the schema itself, not by how the case was generated (the engine mutates
    "positive" cases too). The run's own refusals (422 with the sentence alone: text to an
    image run, a method that does not fit the run, an image of another size) depend on
    the run, which the schema cannot know."""
    if response.status_code != 422 or not response.json().get("errors"):
        return None
    sent = response.request  # what went on the wire, after any mutation
    if sent.method != case.operation.method.upper() or not sent.body:
        return None
    if sent.headers.get("Content-Type", "").split(";")[0].strip() != "application/json":
        return None
    try:
        body = json.loads(sent.body)
    except ValueError:  # not JSON at all: nothing the schema calls valid
        return None
    # Rows of unequal length are the one refusal of a valid body JSON Schema cannot express.
    if all(e["message"].endswith(RAGGED) for e in response.json()["errors"]):
        return None
    if body_schema(case.operation).is_valid(body):
        raise AssertionError(f"a body the schema calls valid failed validation: {response.text}")
    return None


_BODY_SCHEMAS: dict[str, object] = {}


def body_schema(operation):
    """A JSON Schema validator of `operation`'s published request body (OpenAPI 3.1 is
    JSON Schema 2020-12; its $refs resolve against the document's components)."""
    if operation.label not in _BODY_SCHEMAS:
        raw = operation.schema.raw_schema
        content = raw["paths"][operation.path][operation.method]["requestBody"]["content"]
        body = content["application/json"]["schema"]
        document = {**body, "components": raw["components"]}
        _BODY_SCHEMAS[operation.label] = jsonschema_rs.validator_for(document)
    return _BODY_SCHEMAS[operation.label]


@schemathesis.check
def server_still_answers(ctx, response, case):
    """After every request the server answers GET /api/health: 200, every queue empty."""
    with get_client(case.operation.app) as client:
        health = client.get("/api/health", headers={"X-API-Key": KEY})
    assert health.status_code == 200, f"GET /api/health answered {health.status_code}"
    waiting = {name: q["waiting"] for name, q in health.json()["models"].items()}
    assert set(waiting.values()) == {0}, f"requests left waiting: {waiting}"


def train_tiny(work: Path) -> dict[str, Path]:
    """name -> run directory of RUNS, trained under `work` (kept: a second call reuses them)."""
    runs = {}
    for name, (config, overrides) in RUNS.items():
        runs[name] = run_dir = work / name
        if not RunDir(run_dir).checkpoints():
            extra = [
                *TINY,
                *overrides,
                f"data.cache_dir={work / 'cache'}",
                f"train.run_dir={run_dir}",
            ]
            train(load_config(ROOT / "configs" / f"{config}.yaml", extra), progress=False)
    return runs


def serve(runs: dict[str, Path], key: str | None, examples: int, seed: int):
    """The schema of an in-process server of `runs`, configured for a seeded fuzz."""
    settings = Settings(api_key=key)
    app = create_app({n: RunDecoder(n, load_run(p), settings) for n, p in runs.items()}, settings)
    config = {
        "seed": seed,
        "workers": 1,
        "generation": {"max-examples": examples, "deterministic": True, "database": "none"},
        # Answered 2xx or not by the run, not the schema: `validated_as_published` instead.
        "checks": {"positive_data_acceptance": {"enabled": False}},
        # The key as a security scheme of the schema's, so `ignored_auth` can take it away.
        **({"auth": {"openapi": {"APIKeyHeader": {"api_key": key}}}} if key else {}),
        "suppress-health-check": ["all"],
    }
    return schemathesis.openapi.from_asgi(
        "/openapi.json", app, config=schemathesis.Config.from_dict(config)
    )


def fuzz(schema) -> dict:
    """Run every phase against `schema`'s app: {"tried": {(route, status): n}, "phases":
    {phase: n}, "failures": [{route, check, title, message, curl}]}."""
    # Hypothesis cannot draw floats where subnormals flush to zero, which loading a run
    # turned on (attnmt.devices.flush_denormals) in this thread; the engine's threads start
    # from this one's floating-point state. The server's workers keep theirs.
    flushing = float("5e-324") * 1.0 == 0.0
    torch.set_flush_denormal(False)
    try:
        return run_engine(schema)
    finally:
        torch.set_flush_denormal(flushing)


def run_engine(schema) -> dict:
    tried, phases, failures = Counter(), Counter(), []
    for event in engine.from_schema(schema).execute():
        if isinstance(event, events.ScenarioFinished):
            recorder = event.recorder
            for interaction in recorder.interactions.values():
                status = interaction.response.status_code if interaction.response else 0
                tried[recorder.label, status] += 1
                phases[event.phase.value] += 1
            for checks in recorder.checks.values():
                failures += [
                    {
                        "route": recorder.label,
                        "check": check.name,
                        "title": check.failure_info.failure.title,
                        "message": check.failure_info.failure.message,
                        "curl": check.failure_info.code_sample,
                    }
                    for check in checks
                    if check.failure_info is not None
                ]
        elif isinstance(event, events.NonFatalError | events.FatalError):
            label = getattr(event, "label", "engine")
            failures.append({"route": label, "check": "error", "message": str(event.value)})
    return {"tried": tried, "phases": phases, "failures": failures}


def read_at_size(schema, examples: int, key: str | None = None) -> Counter:
    """POST /api/read with images of each image run's size (GET /api/models), levels, beam
    and weights drawn by Hypothesis: {(route, status): n}. Every answer goes through the
    same checks and must be a 200."""
    headers = {"X-API-Key": key} if key else None
    models = schema["/api/models"]["GET"].Case(headers=headers).call().json()["models"]
    sizes = {m["name"]: (m["image"]["height"], m["image"]["width"]) for m in models if m["image"]}
    tried = Counter()

    @hypothesis.settings(max_examples=examples, derandomize=True, database=None, deadline=None)
    @hypothesis.given(data=st.data())
    def read(data) -> None:
        model = data.draw(st.sampled_from(sorted(sizes)))
        height, width = sizes[model]
        row = st.lists(st.integers(0, 16), min_size=width, max_size=width)
        body = {"image": data.draw(st.lists(row, min_size=height, max_size=height))}
        body |= {"model": model, "beam": data.draw(st.integers(1, 3))}
        body["weights"] = data.draw(st.sampled_from([None, True, False]))
        case = schema["/api/read"]["POST"].Case(body=body, headers=headers)
        answer = case.call_and_validate()
        assert answer.status_code == 200, answer.text
        tried[AT_SIZE, answer.status_code] += 1

    read()
    return tried


def figures(found: dict) -> dict:
    """The requests of one server's fuzz by phase, status and route, and its failures."""
    by_status, by_route = Counter(), {}
    for (route, status), n in sorted(found["tried"].items()):
        by_status[str(status)] += n
        by_route.setdefault(route, {})[str(status)] = n
    return {
        "requests": sum(found["tried"].values()),
        "by_phase": dict(found["phases"]),
        "by_status": dict(sorted(by_status.items())),
        "by_route": by_route,
        "failures": found["failures"],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=200, help="per route and mode")
    parser.add_argument("--seed", type=int, default=20261126)
    parser.add_argument("--work", type=Path, default=ROOT / "benchmarks" / "work" / "fuzz_api")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    runs = train_tiny(args.work)
    record = {
        "date": time.strftime("%Y-%m-%d"),
        "cpu": cpu_model(),
        "schemathesis": schemathesis.__version__,
        "hypothesis": hypothesis.__version__,
        "examples": args.examples,
        "seed": args.seed,
        "servers": {},
    }
    for server, (names, key) in SERVERS.items():
        started = time.perf_counter()
        schema = serve({n: runs[n] for n in names}, key, args.examples, args.seed)
        found = fuzz(schema)
        at_size = read_at_size(schema, args.examples, key)
        found["tried"] += at_size
        found["phases"]["images at size"] = sum(at_size.values())
        record["servers"][server] = {"runs": names, "api_key": key is not None, **figures(found)}
        record["servers"][server]["seconds"] = round(time.perf_counter() - started, 1)
        shown = record["servers"][server]
        print(f"{server}: {shown['requests']} requests, {len(shown['failures'])} failures")
        print(f"  by status {shown['by_status']}, by phase {shown['by_phase']}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")
    return 1 if any(s["failures"] for s in record["servers"].values()) else 0


if __name__ == "__main__":
    sys.exit(main())
