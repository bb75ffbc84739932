"""Generators: the OpenAI-compatible client against a local stub server, the tiny LM, the scripted double."""

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from iclr25.improver import (
    ImProver,
    ImProverConfig,
    ScriptedRewriter,
    Theorem,
    TinyLMGenerator,
    ToyTacticChecker,
    scripted_edits,
)
from iclr25.improver.generators import compact_cos, lm_prompt

pytest.importorskip("openai")
from iclr25.improver import OpenAICompatibleGenerator  # noqa: E402

DECL = "theorem t (p q : Prop) (hp : p) (hq : q) : p ∧ q"
VERBOSE = "constructor\n· have h : p := hp\n  exact h\n· exact hq"


class _Stub(BaseHTTPRequestHandler):
    mode = "ok"
    requests: list = []

    def log_message(self, *a):  # silence
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        _Stub.requests.append((self.path, body))
        n = body.get("n", 1)
        if _Stub.mode == "garbage":
            payload = {"id": "x", "object": "chat.completion", "oops": True}
        else:
            k = 1 if _Stub.mode == "one_at_a_time" else n
            text = "```lean\nexact ⟨hp, hq⟩\n```"
            payload = {
                "id": "c",
                "object": "chat.completion",
                "created": 0,
                "model": body["model"],
                "choices": [
                    {"index": i, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
                    for i in range(k)
                ],
            }
        data = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def server():
    srv = HTTPServer(("127.0.0.1", 0), _Stub)
    th = threading.Thread(target=srv.serve_forever, daemon=True)
    th.start()
    _Stub.requests.clear()
    yield f"http://127.0.0.1:{srv.server_address[1]}/v1"
    srv.shutdown()
    srv.server_close()


def test_openai_client_end_to_end_against_stub_server(server):
    _Stub.mode = "ok"
    gen = OpenAICompatibleGenerator("stub-model", base_url=server, api_key="k", max_retries=0)
    imp = ImProver(ToyTacticChecker(), gen, "length", ImProverConfig(n=3, m=2)).improve(
        Theorem(DECL, VERBOSE)
    )
    assert imp.output.proof == "exact ⟨hp, hq⟩" and imp.output.correct and imp.delta == pytest.approx(-0.75)
    path, body = _Stub.requests[0]
    assert path == "/v1/chat/completions" and body["model"] == "stub-model" and body["n"] == 3
    assert body["messages"][-1]["role"] == "user" and "<CURRENT>" in body["messages"][-1]["content"]
    assert "/-" in body["messages"][-1]["content"]  # Chain-of-States comments reach the server


def test_openai_client_collects_n_from_servers_that_return_one(server):
    _Stub.mode = "one_at_a_time"
    gen = OpenAICompatibleGenerator("stub-model", base_url=server, api_key="k", max_retries=0)
    assert len(gen.generate([{"role": "user", "content": "hi"}], 3)) == 3 and len(_Stub.requests) == 3


def test_openai_client_rejects_garbage(server):
    _Stub.mode = "garbage"
    gen = OpenAICompatibleGenerator("stub-model", base_url=server, api_key="k", max_retries=0)
    with pytest.raises(ValueError, match="no choices"):
        gen.generate([{"role": "user", "content": "hi"}], 1)
    with pytest.raises(ValueError, match="temperature"):
        OpenAICompatibleGenerator("m", base_url=server, temperature=float("nan"))


def test_scripted_edits_are_correct_and_shorter():
    c = ToyTacticChecker()
    base = c.check("", DECL, VERBOSE)
    eds = scripted_edits(VERBOSE)
    assert {name for name, _ in eds} >= {"inline_have"}
    for _, p in eds:
        r = c.check("", DECL, p)
        assert r.correct and len(r.steps) < len(base.steps)
    with pytest.raises(ValueError, match="p_error"):
        ScriptedRewriter(p_error=1.5)


def test_compact_cos_keeps_only_targets():
    from iclr25.improver import render_chain_of_states

    c = ToyTacticChecker()
    shown = render_chain_of_states(VERBOSE, c.check("", DECL, VERBOSE))
    small = compact_cos(shown)
    assert "-- ⊢ p" in small and "hp : p" not in small and "-- Goals Solved!" in small
    assert lm_prompt(DECL, VERBOSE, "line 1: boom").endswith("E line 1: boom\n=>\n")


def test_tiny_lm_learns_a_fixed_rewrite():
    pairs = [(lm_prompt(DECL, VERBOSE), "exact ⟨hp, hq⟩")] * 8
    gen, stats = TinyLMGenerator.train(
        pairs, seed=0, steps=50, batch_size=4, hidden=32, layers=1, vocab_size=300, temperature=0.3, lr=1e-2
    )
    assert stats["loss_last"] < 0.3 * stats["loss_first"]
    prompt = [{"role": "user", "content": f"x\n<CURRENT>\n{DECL} := by\n{VERBOSE}\n</CURRENT>"}]
    outs = gen.generate(prompt, 4)
    assert len(outs) == 4 and sum(o.strip() == "exact ⟨hp, hq⟩" for o in outs) >= 3
    with pytest.raises(ValueError, match="pairs"):
        TinyLMGenerator.train([], steps=1)
