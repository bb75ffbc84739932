"""The ``full`` preset end to end without Lean or a model: a fake ``lake`` (``lake env repl`` → a process speaking
the Lean REPL's JSON protocol, see ``fake_lean_repl.py``) and a local OpenAI-compatible stub server whose answers
are the scripted double's rewrites of the ``<CURRENT>`` proof."""

import dataclasses
import json
import stat
import sys
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

pytest.importorskip("openai")

from iclr25.improver import ScriptedRewriter  # noqa: E402
from iclr25.improver.experiment import PRESETS, run  # noqa: E402
from iclr25.improver.lean_file import parse_lean_theorems, read_lean_theorems  # noqa: E402

FAKE = str(Path(__file__).with_name("fake_lean_repl.py"))

LEAN_FILE = """import Mathlib
open Nat

/-- two verbose proofs to shorten -/
theorem and_swap (p q : Prop) (hp : p) (hq : q) : q ∧ p := by
  constructor
  · have h : q := hq
    exact h
  · exact hp

def two := 2

lemma term_mode (p : Prop) (h : p) : p := h

theorem or_left (p q : Prop) (hp : p) :
    p ∨ q := by
  left
  exact hp
"""


class _Server(BaseHTTPRequestHandler):
    mode = "ok"
    calls = 0

    def log_message(self, *a):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        _Server.calls += 1
        if _Server.mode == "html":
            data, ctype = b"<html><body>502 Bad Gateway</body></html>", "text/html"
        elif _Server.mode == "notjson":
            data, ctype = b"upstream connect error", "application/json"
        else:
            outs = ScriptedRewriter(seed=_Server.calls, p_error=0.0).generate(
                body["messages"], body.get("n", 1)
            )
            payload = {
                "id": "c",
                "object": "chat.completion",
                "created": 0,
                "model": body["model"],
                "choices": [
                    {"index": i, "message": {"role": "assistant", "content": t}, "finish_reason": "stop"}
                    for i, t in enumerate(outs)
                ],
            }
            data, ctype = json.dumps(payload).encode(), "application/json"
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def server():
    srv = HTTPServer(("127.0.0.1", 0), _Server)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    _Server.mode, _Server.calls = "ok", 0
    yield f"http://127.0.0.1:{srv.server_address[1]}/v1"
    srv.shutdown()
    srv.server_close()


@pytest.fixture
def lean_project(tmp_path, monkeypatch):
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "Demo.lean").write_text(LEAN_FILE, encoding="utf-8")
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    lake = bin_ / "lake"  # `lake env repl` → the fake REPL
    lake.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE}"\n')
    lake.chmod(lake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_}:{__import__('os').environ['PATH']}")
    monkeypatch.setenv("FAKE_REPL_LOG", str(tmp_path / "sent.jsonl"))
    for k in ("FAKE_REPL_CRASH_AT", "FAKE_REPL_GARBAGE", "FAKE_REPL_SCRIPT"):
        monkeypatch.delenv(k, raising=False)
    return proj


def test_lean_file_reader_keeps_context_and_skips_term_proofs():
    thms = parse_lean_theorems(LEAN_FILE)
    assert [t.name for t in thms] == ["and_swap", "or_left"]
    assert thms[0].context == "import Mathlib\nopen Nat\n\n/-- two verbose proofs to shorten -/"
    assert (
        thms[1].decl == "theorem or_left (p q : Prop) (hp : p) :\n    p ∨ q"
        and thms[1].proof == "left\nexact hp"
    )
    assert thms[1].context.startswith(thms[0].context) and "lemma term_mode" in thms[1].context
    assert "theorem and_swap" in thms[1].context  # earlier theorems are context of later ones
    with pytest.raises(ValueError, match="path"):
        read_lean_theorems("/nonexistent/x.lean")


def test_full_preset_runs_end_to_end_with_a_fake_lake_and_a_stub_server(
    lean_project, server, monkeypatch, tmp_path
):
    monkeypatch.setenv("OPENAI_BASE_URL", server)
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    cfg = dataclasses.replace(
        PRESETS["full"],
        lean_project=str(lean_project),
        lean_file="Demo.lean",
        llm_model="stub",
        seeds=2,
        agent=dataclasses.replace(PRESETS["full"].agent, m=2),
    )
    res = run(cfg, tmp_path / "out")
    assert [c.id for c in res.claims] == ["improved_accuracy", "length_gain", "cos_helps"] and res.valid
    s = res.per_seed[0]
    assert s["n_theorems"] == 2 and s["repl_starts"] == 1
    assert s["lean"]["baseline"]["original_accuracy"] == 100.0 and s["lean"]["improver"]["accuracy"] == 100.0
    assert s["lean"]["improver"]["improvement"] > 0  # the stub's rewrites are correct and shorter
    assert {r["name"] for r in s["rows"]} == {"and_swap", "or_left"}
    assert "ImProver on Demo.lean" in res.report_md and res.figures and res.figures[0].exists()
    assert "sign" in res.claims[2].note
    sent = [json.loads(x) for x in (tmp_path / "sent.jsonl").read_text().splitlines()]
    imports = [c for c in sent if "import Mathlib" in c.get("cmd", "") and not c.get("allTactics")]
    assert len(imports) == 2  # one elaboration of the header per seed's REPL process, not one per candidate
    cands = [c for c in sent if c.get("allTactics")]
    assert len(cands) > 20 and all("env" in c for c in cands)
    assert any("tactic" in c and "proofState" in c for c in sent)  # goals after each step by replay


@pytest.mark.parametrize("mode,why", [("html", "text/html"), ("notjson", "upstream connect error")])
def test_a_garbage_server_body_is_a_clear_error_naming_the_server(server, mode, why):
    from iclr25.improver import OpenAICompatibleGenerator

    _Server.mode = mode
    gen = OpenAICompatibleGenerator("stub", base_url=server, api_key="k", max_retries=0)
    with pytest.raises(ValueError, match="not a chat completion") as e:
        gen.generate([{"role": "user", "content": "hi"}], 2)
    assert server in str(e.value) and why in str(e.value)
