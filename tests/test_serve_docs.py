"""docs/serving.md's curl commands, run as written against a live `attnmt serve` (tiny runs
served under the docs' names: `quickstart`, and the image runs `captions-soft` and
`glimpses`): each exits 0, answers JSON with the keys the page shows, and the status code
the page shows where it shows one."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[1] / "docs" / "serving.md"
KEY = "docs-test-key"


def examples() -> list[tuple[str, str | None]]:
    """(command, the output line the page shows after it, or None) for each `$ curl`."""
    found = []
    for block in re.findall(r"```console\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S):
        lines = block.splitlines()
        for i, line in enumerate(lines):
            if line.startswith("$ curl"):
                shown = lines[i + 1] if i + 1 < len(lines) else None
                found.append((line[2:], None if shown is None or shown[:2] == "$ " else shown))
    return found


@pytest.fixture(scope="module")
def servers(tiny_runs, tiny_image_runs):
    """Two servers of the tiny RNN and image runs: without and with an API key; yields their
    ports."""
    started = []
    for key in (None, KEY):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        env = {k: v for k, v in os.environ.items() if k != "ATTNMT_API_KEY"}
        if key:
            env["ATTNMT_API_KEY"] = key
        command = [sys.executable, "-m", "attnmt", "serve", f"quickstart={tiny_runs['rnn']}"]
        command += [f"captions-soft={tiny_image_runs['soft']}"]
        command += [f"glimpses={tiny_image_runs['glimpses']}"]
        process = subprocess.Popen(
            [*command, "--port", str(port)], env=env, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        started.append((process, port))
    for process, port in started:
        deadline = time.monotonic() + 120
        while True:
            try:
                request = urllib.request.Request(
                    f"http://127.0.0.1:{port}/api/health", headers={"X-API-Key": KEY}
                )
                urllib.request.urlopen(request, timeout=2).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"attnmt serve did not start: {process.stderr.read()}")
                time.sleep(0.2)
    yield {"open": started[0][1], "keyed": started[1][1]}
    for process, _ in started:
        process.terminate()
        _, err = process.communicate(timeout=30)
        assert "Traceback" not in err, err


def test_the_page_has_its_examples():
    commands = [c for c, _ in examples()]
    assert len(commands) >= 7
    assert any("/api/translate" in c and '"weights": true' in c for c in commands)
    assert any("Authorization: Bearer $ATTNMT_API_KEY" in c for c in commands)
    assert any("/api/score" in c and '"pairs"' in c for c in commands)
    assert any("/api/translate" in c and '"explain": "occlusion"' in c for c in commands)
    assert any("/api/translate" in c and '"search": true' in c for c in commands)
    steered = [c for c in commands if '"prefix"' in c and '"alternatives"' in c]
    assert any("/api/translate" in c for c in steered)
    assert any("/api/translate/stream" in c for c in commands)
    reads = [c for c in commands if "/api/read" in c]
    assert any("/api/examples" in c and "glimpses" in c for c in reads)


@pytest.mark.parametrize(("command", "shown"), examples(), ids=lambda x: str(x)[:70])
def test_curl_example(servers, command, shown):
    keyed = "ATTNMT_API_KEY" in command
    port = servers["keyed" if keyed else "open"]
    env = {**os.environ, "ATTNMT_API_KEY": KEY}
    result = subprocess.run(
        command.replace("localhost:8000", f"127.0.0.1:{port}"),
        shell=True,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout.strip()
    if "/api/translate/stream" in command:  # Server-Sent Events: start, steps, done
        kinds = [line[len("event: ") :] for line in out.splitlines() if line.startswith("event: ")]
        assert kinds[0] == "start" and kinds[-1] == "done" and "step" in kinds, kinds
        assert shown is None or out.splitlines()[0] == shown
        done = json.loads(out.rsplit("data: ", 1)[1])
        assert done["translations"][0]["search"]["nodes"]
        return
    if "%{http_code}" in command:  # the page shows the body, then the status code
        out, status = out.rsplit(" ", 1)
        assert shown is not None and status == shown.rsplit(" ", 1)[1]
        shown = shown.rsplit(" ", 1)[0]
    answer = json.loads(out)
    if "/api/examples" in command:  # an example read: the digits, a map per step
        (reading,) = answer["readings"]
        assert len(reading["attention"]) == len(reading["target_pieces"])
        assert (reading["glimpses"] is not None) == ("glimpses" in command)
    if '"explain"' in command and "translations" in answer:  # explained, not refused
        (line,) = answer["translations"]
        assert f'"explain": "{line["explanations"][0]["method"]}"' in command
        assert (line["attention"] is not None) == ('"weights": true' in command)
    if shown is not None:
        assert set(answer) == set(json.loads(shown))
        for key in ("translations", "scores"):
            if key in answer:
                expected = json.loads(shown)[key][0]
                assert set(answer[key][0]) == set(expected)
