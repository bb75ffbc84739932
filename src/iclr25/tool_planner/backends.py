"""Tool backends: where calls are executed.

- :class:`SimulatedToolEnv`: a seeded library of interchangeable APIs with the failure modes of real tool
  servers (ToolBench's "not working", flaky rate limits, schema mismatches) and look-alike distractors, plus
  multi-step tasks with ground-truth answers — the offline stand-in for RapidAPI (no LLM judge needed).
- :class:`BFCLToolEnv`: the real executable API classes and function docs shipped in the ``bfcl-eval`` wheel
  (install with ``pip install --no-deps bfcl-eval``).
- :class:`HTTPToolBackend`: a user's own tool server (POST ``{"name", "arguments"}``).

Every backend returns a :class:`ToolResult`; it never raises for a bad call.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from .schemas import Tool, bfcl_to_openai, validate_arguments
from .tasks import Goal, Ref, Task


@dataclass(frozen=True)
class ToolResult:
    ok: bool
    output: dict | None = None
    error: str = ""


class ToolBackend(Protocol):
    tools: list[Tool]

    def reset(self, task_id: str) -> None:
        """Start an episode (one task): per-task state and counters are reset."""

    def call(self, name: str, arguments: dict) -> ToolResult: ...


def _lookup(by_name: dict[str, Tool], name: str, arguments: Any) -> tuple[Tool | None, ToolResult | None]:
    """The tool called ``name`` and None, or None and the failed result a server would send (unknown API,
    arguments that do not match its schema)."""
    tool = by_name.get(name)
    if tool is None:
        return None, ToolResult(False, error=f"no API named {name!r}")
    errs = validate_arguments(tool, arguments)
    if errs:
        return None, ToolResult(False, error="arguments do not match the schema: " + "; ".join(errs))
    return tool, None


def _u01(*key: Any) -> float:
    """A uniform number in [0, 1) that depends only on ``key`` (paired across methods)."""
    h = hashlib.blake2b(json.dumps(key, default=str).encode(), digest_size=8).digest()
    return int.from_bytes(h, "little") / 2.0**64


def _hx(*key: Any) -> str:
    return hashlib.blake2b(json.dumps(key, default=str).encode(), digest_size=4).hexdigest()


# (key, input field, output field, three paraphrases of what it does)
CAPABILITIES: tuple[tuple[str, str, str, tuple[str, str, str]], ...] = (
    (
        "city_country",
        "city",
        "country",
        (
            "the country a city is located in",
            "which nation a given city belongs to",
            "the country name for a city",
        ),
    ),
    (
        "country_currency",
        "country",
        "currency",
        (
            "the official currency of a country",
            "which money a nation uses",
            "the currency code used in a country",
        ),
    ),
    (
        "currency_rate",
        "currency",
        "exchange_rate",
        (
            "the exchange rate of a currency against the US dollar",
            "how many dollars one unit of a currency is worth",
            "the current conversion rate for a currency",
        ),
    ),
    (
        "country_language",
        "country",
        "language",
        (
            "the main spoken language of a country",
            "which language people speak in a nation",
            "the official language of a country",
        ),
    ),
    (
        "language_greeting",
        "language",
        "greeting",
        (
            "how to say hello in a language",
            "the common greeting phrase of a language",
            "a polite salutation in a given language",
        ),
    ),
    (
        "city_zipcode",
        "city",
        "zipcode",
        ("the postal code of a city", "a zip code for a city name", "the mailing code of a town"),
    ),
    (
        "zipcode_celsius",
        "zipcode",
        "celsius",
        (
            "the current temperature in Celsius at a postal code",
            "today's weather temperature for a zip code",
            "how warm it is at a zip code right now",
        ),
    ),
    (
        "celsius_fahrenheit",
        "celsius",
        "fahrenheit",
        (
            "convert a temperature from Celsius to Fahrenheit",
            "the Fahrenheit value of a Celsius reading",
            "a Celsius to Fahrenheit unit conversion",
        ),
    ),
    (
        "city_airport",
        "city",
        "airport",
        (
            "the nearest airport to a city",
            "the main airport code serving a city",
            "which airport is closest to a town",
        ),
    ),
    (
        "airport_flight",
        "airport",
        "flight",
        (
            "the next departing flight number from an airport",
            "an upcoming flight leaving an airport",
            "the soonest scheduled departure at an airport",
        ),
    ),
    (
        "flight_gate",
        "flight",
        "gate",
        (
            "the boarding gate of a flight",
            "which gate a flight number departs from",
            "the terminal gate assigned to a flight",
        ),
    ),
    (
        "company_symbol",
        "company",
        "symbol",
        (
            "the stock ticker symbol of a company",
            "the exchange symbol a company trades under",
            "the ticker for a listed company",
        ),
    ),
    (
        "symbol_price",
        "symbol",
        "price",
        (
            "the latest share price for a stock ticker",
            "the current market quote of a stock symbol",
            "how much one share of a ticker costs",
        ),
    ),
    (
        "company_ceo",
        "company",
        "ceo",
        (
            "the chief executive officer of a company",
            "who runs a company as CEO",
            "the name of a company's chief executive",
        ),
    ),
    (
        "ceo_email",
        "ceo",
        "email",
        (
            "the work email address of a CEO",
            "how to contact a chief executive by email",
            "the email of a named executive",
        ),
    ),
    (
        "email_userid",
        "email",
        "user_id",
        (
            "the account user id registered to an email address",
            "the internal user identifier for an email",
            "which user id owns an email address",
        ),
    ),
    (
        "userid_username",
        "user_id",
        "username",
        (
            "the public username of a user id",
            "the display handle for an account id",
            "the screen name belonging to a user identifier",
        ),
    ),
    (
        "artist_album",
        "artist",
        "album",
        (
            "the latest album released by a music artist",
            "the newest record of a singer or band",
            "an artist's most recent album title",
        ),
    ),
    (
        "album_song",
        "album",
        "song",
        ("the top track on an album", "the most popular song of a record", "the hit single from an album"),
    ),
    (
        "song_duration",
        "song",
        "duration",
        ("the length of a song in seconds", "how long a music track plays", "the running time of a song"),
    ),
    (
        "word_definition",
        "word",
        "definition",
        (
            "the dictionary definition of an English word",
            "what a word means",
            "the meaning of a word from a dictionary",
        ),
    ),
    (
        "word_synonym",
        "word",
        "synonym",
        (
            "a synonym of an English word",
            "another word with the same meaning",
            "an alternative term that means the same as a word",
        ),
    ),
    (
        "movie_director",
        "movie",
        "director",
        ("the director of a film", "who directed a movie", "the filmmaker behind a movie title"),
    ),
    (
        "director_birthyear",
        "director",
        "birth_year",
        (
            "the birth year of a film director",
            "the year a movie director was born",
            "when a filmmaker was born",
        ),
    ),
    (
        "book_author",
        "book",
        "author",
        ("the author of a book title", "who wrote a book", "the writer of a novel"),
    ),
    (
        "author_country",
        "author",
        "country",
        (
            "the home country of an author",
            "the nationality of a writer",
            "which country a novelist comes from",
        ),
    ),
    (
        "recipe_ingredient",
        "recipe",
        "ingredient",
        (
            "the main ingredient of a recipe",
            "the key food item a dish needs",
            "the primary component of a cooking recipe",
        ),
    ),
    (
        "ingredient_calories",
        "ingredient",
        "calories",
        (
            "the calories in 100 grams of an ingredient",
            "the energy content of a food item",
            "how many kilocalories an ingredient has",
        ),
    ),
    (
        "isbn_book",
        "isbn",
        "book",
        (
            "the book title for an ISBN number",
            "which book an ISBN identifies",
            "the title registered under an ISBN",
        ),
    ),
    (
        "team_city",
        "team",
        "city",
        ("the home city of a sports team", "where a sports club is based", "the city a team plays in"),
    ),
)
_VERBS = ("Get", "Find", "Look up", "Retrieve", "Return", "Fetch", "Query", "Obtain")
_BRANDS = (
    "atlas",
    "rapid",
    "open",
    "quick",
    "data",
    "info",
    "smart",
    "hub",
    "pro",
    "cloud",
    "meta",
    "easy",
    "swift",
    "prime",
    "zen",
    "nova",
    "apex",
    "bright",
    "core",
    "lumen",
)
_NOISE = (
    "Free tier available.",
    "Updated daily.",
    "Returns JSON.",
    "Rate limited to 100 requests per minute.",
    "Powered by open data.",
    "Low latency worldwide.",
    "Requires no login.",
    "Used by thousands of developers.",
)
_TWISTS = (
    "as recorded in a 1990s archive",
    "from a deprecated legacy dataset",
    "estimated by a rough statistical model",
    "for historical comparison only",
    "using fictional sample data",
    "for a different calendar year",
)
# How users ask for each capability: a paraphrase bank separate from the API descriptions above (users' queries
# do not quote API docs), so retrieval from a goal to its APIs is not a string match.
GOAL_PHRASES: dict[str, tuple[str, str, str]] = {
    "city_country": (
        "what country that city is in",
        "the nation where this town lies",
        "which state the place is part of",
    ),
    "country_currency": (
        "what money they pay with there",
        "the cash people use in that nation",
        "the legal tender of that place",
    ),
    "currency_rate": (
        "what that money is worth in dollars today",
        "the dollar value of that currency",
        "how that money trades against USD",
    ),
    "country_language": (
        "what people talk there",
        "the tongue most residents speak in that nation",
        "which language is spoken in that place",
    ),
    "language_greeting": (
        "the word for hi in that tongue",
        "how people greet each other in that language",
        "a way to say good day in it",
    ),
    "city_zipcode": (
        "the post code of that town",
        "what to write as the zip when mailing to that city",
        "the postal number of the place",
    ),
    "zipcode_celsius": (
        "how hot it is there in degrees C",
        "the weather in degrees at that post code",
        "the local temperature for that zip today",
    ),
    "celsius_fahrenheit": (
        "that reading in degrees F",
        "the same temperature on the Fahrenheit scale",
        "what it is in Fahrenheit",
    ),
    "city_airport": (
        "where to fly into for that city",
        "the closest place to catch a plane near that town",
        "which airfield serves the city",
    ),
    "airport_flight": (
        "the next plane out of there",
        "a departure leaving that airfield soon",
        "which flight takes off next from it",
    ),
    "flight_gate": (
        "where to board that flight",
        "the gate for that departure",
        "which gate the plane leaves from",
    ),
    "company_symbol": (
        "the ticker that firm trades under",
        "its code on the stock market",
        "the stock symbol of that business",
    ),
    "symbol_price": (
        "what that stock costs now",
        "the share price for that ticker today",
        "how much one share is worth",
    ),
    "company_ceo": (
        "who is the boss of that firm",
        "the person leading that business",
        "the head executive of the company",
    ),
    "ceo_email": (
        "how to email that executive",
        "the address to write to that person",
        "the contact mail for that boss",
    ),
    "email_userid": (
        "the account id behind that mail address",
        "which user account that address belongs to",
        "the id of the account with that email",
    ),
    "userid_username": (
        "the handle of that account",
        "what name that user shows publicly",
        "the screen name for that id",
    ),
    "artist_album": (
        "the newest record by that musician",
        "what album that band put out last",
        "the singer's latest release",
    ),
    "album_song": (
        "the best known track on that record",
        "the biggest hit from it",
        "which song on the album is most played",
    ),
    "song_duration": (
        "how many seconds that track lasts",
        "the play time of that tune",
        "how long the song runs",
    ),
    "word_definition": (
        "what that word means",
        "the sense of that term in a dictionary",
        "an explanation of the word",
    ),
    "word_synonym": ("another word for it", "a term meaning the same thing", "a word I could use instead"),
    "movie_director": (
        "who made that film",
        "the person who directed the picture",
        "the director behind that movie",
    ),
    "director_birthyear": (
        "what year that filmmaker was born",
        "the year of birth of the director",
        "when that person was born",
    ),
    "book_author": ("who wrote that book", "the writer of that title", "the person who penned the novel"),
    "author_country": (
        "where that writer is from",
        "the homeland of the author",
        "the nation the novelist grew up in",
    ),
    "recipe_ingredient": (
        "the main thing that dish needs",
        "the key ingredient of that recipe",
        "what the meal is mostly made of",
    ),
    "ingredient_calories": (
        "how many calories are in it",
        "the kcal per 100 g of that food",
        "the energy in that ingredient",
    ),
    "isbn_book": (
        "which book has that ISBN",
        "the title behind that number",
        "the book that ISBN stands for",
    ),
    "team_city": (
        "where that team plays at home",
        "the home town of that club",
        "which city the team is from",
    ),
}
_ASKS = (
    "Tell me",
    "I need",
    "Please find",
    "Can you give me",
    "Show me",
    "I want to know",
    "Work out",
    "Check",
)
_EXTRA_PARAMS = ("region_code", "api_token", "locale", "account_id")
FAILURE_MODES = ("ok", "flaky", "dead", "schema_mismatch")
GOAL_BANKS = ("user", "api")


class SimulatedToolEnv:
    """Seeded tool library over ``n_capabilities`` capabilities (pure functions), each offered by 2–6 API
    variants with paraphrased names/descriptions and a failure mode (ok / flaky with ``p_flaky`` / dead /
    schema-mismatch: needs a parameter no task provides; at least one ok variant per capability), plus
    ``n_distractors`` look-alike APIs that compute something else (they error with ``p_distractor_error`` and
    otherwise return a plausible wrong value). Randomness of a call depends only on (world seed, task, API, how
    often that API was called in the task), so every method faces the same coin flips. Task goals are worded from
    ``goal_bank="user"`` (:data:`GOAL_PHRASES`, separate from the API descriptions; default) or ``"api"`` (the
    API descriptions' own phrases, the earlier harness: near-oracle retrieval)."""

    def __init__(
        self,
        seed: int = 0,
        n_capabilities: int = 30,
        variants: tuple[int, int] = (2, 6),
        n_distractors: int = 40,
        failure_mix: Sequence[float] = (0.65, 0.12, 0.12, 0.11),
        p_flaky: float = 0.5,
        p_distractor_error: float = 0.7,
        goal_bank: str = "user",
    ):
        if not 1 <= n_capabilities <= len(CAPABILITIES):
            raise ValueError(f"n_capabilities must be in [1, {len(CAPABILITIES)}], got {n_capabilities!r}")
        lo, hi = variants
        if not 1 <= lo <= hi:
            raise ValueError(f"variants must be (lo, hi) with 1 <= lo <= hi, got {variants!r}")
        mix = np.asarray(failure_mix, dtype=float)
        if mix.shape != (4,) or not np.isfinite(mix).all() or (mix < 0).any() or mix.sum() <= 0:
            raise ValueError(
                f"failure_mix must be 4 non-negative weights (ok, flaky, dead, schema_mismatch), got {failure_mix!r}"
            )
        for nm, p in (("p_flaky", p_flaky), ("p_distractor_error", p_distractor_error)):
            if not (isinstance(p, (int, float)) and 0.0 <= p <= 1.0):
                raise ValueError(f"{nm} must be a probability in [0, 1], got {p!r}")
        if goal_bank not in GOAL_BANKS:
            raise ValueError(f"goal_bank must be one of {GOAL_BANKS}, got {goal_bank!r}")
        self.goal_bank = goal_bank
        if not isinstance(n_distractors, int) or n_distractors < 0:
            raise ValueError(f"n_distractors must be an int >= 0, got {n_distractors!r}")
        self.seed, self.p_flaky, self.p_distractor_error = (
            int(seed),
            float(p_flaky),
            float(p_distractor_error),
        )
        rng = np.random.default_rng([self.seed, 1])
        caps = [CAPABILITIES[i] for i in sorted(rng.choice(len(CAPABILITIES), n_capabilities, replace=False))]
        self.capabilities = {c[0]: c for c in caps}
        self.tools: list[Tool] = []
        self.labels: dict[str, str] = {}  # API name → capability key (or distractor_i)
        self.modes: dict[str, str] = {}
        self._impl: dict[str, tuple[str, str, str, bool]] = {}  # name → (cap key, input, output, wrong)
        used: set[str] = set()

        def unique(name: str) -> str:
            base, i = name, 2
            while name in used:
                name, i = f"{base}_{i}", i + 1
            used.add(name)
            return name

        mix = mix / mix.sum()
        for key, inp, outp, phrases in caps:
            n = int(rng.integers(lo, hi + 1))
            modes = [FAILURE_MODES[i] for i in rng.choice(4, n, p=mix)]
            if "ok" not in modes:
                modes[int(rng.integers(n))] = "ok"
            for mode in modes:
                name = unique(f"{_BRANDS[rng.integers(len(_BRANDS))]}_{key}")
                desc = f"{_VERBS[rng.integers(len(_VERBS))]} {phrases[rng.integers(3)]}."
                if rng.random() < 0.5:
                    desc += " " + _NOISE[rng.integers(len(_NOISE))]
                props = {inp: {"type": "string", "description": f"The {inp.replace('_', ' ')}."}}
                req = [inp]
                if mode == "schema_mismatch":
                    extra = _EXTRA_PARAMS[rng.integers(len(_EXTRA_PARAMS))]
                    props[extra] = {"type": "string", "description": f"Your {extra.replace('_', ' ')}."}
                    req.append(extra)
                params = {"type": "object", "properties": props, "required": req}
                self.tools.append(Tool(name, desc, params, category=key))
                self.labels[name], self.modes[name] = key, mode
                self._impl[name] = (key, inp, outp, False)
        for i in range(n_distractors):
            key, inp, outp, phrases = caps[int(rng.integers(len(caps)))]
            twist = _TWISTS[rng.integers(len(_TWISTS))]
            name = unique(f"{_BRANDS[rng.integers(len(_BRANDS))]}_{key}_{twist.split()[-1]}")
            desc = f"{_VERBS[rng.integers(len(_VERBS))]} {phrases[rng.integers(3)]} {twist}."
            params = {
                "type": "object",
                "properties": {inp: {"type": "string", "description": f"The {inp}."}},
                "required": [inp],
            }
            self.tools.append(Tool(name, desc, params, category=f"distractor_{i}"))
            self.labels[name], self.modes[name] = f"distractor_{i}", "distractor"
            self._impl[name] = (key, inp, outp, True)
        order = rng.permutation(len(self.tools))  # the library does not list variants next to each other
        self.tools = [self.tools[i] for i in order]
        self._by_name = {t.name: t for t in self.tools}
        self._episode = ""
        self._counts: Counter = Counter()

    def retrieval(self, tasks: Sequence[Task], index: Any, ks: Sequence[int] = (1, 5)) -> dict[str, float]:
        """How often ranking the whole library by a goal's text (``index.rank``) puts a working-capability API
        (one of the goal's own variants, not a distractor) in the top k, in % over all goals of ``tasks``."""
        hits = {k: 0 for k in ks}
        n = 0
        for t in tasks:
            for g in t.goals:
                ranked = index.rank(g.text)
                n += 1
                for k in ks:
                    hits[k] += any(self.labels[a.name] == g.capability for a in ranked[:k])
        return {f"top{k}": 100.0 * hits[k] / max(n, 1) for k in ks}

    def value(self, key: str, x: str) -> str:
        """The true output of capability ``key`` on input ``x``."""
        return f"{self.capabilities[key][2]}:{_hx(self.seed, key, x)}"

    def reset(self, task_id: str) -> None:
        self._episode = str(task_id)
        self._counts = Counter()

    def call(self, name: str, arguments: dict) -> ToolResult:
        tool, rejected = _lookup(self._by_name, name, arguments)
        if rejected is not None:
            return rejected
        self._counts[name] += 1
        u = _u01(self.seed, self._episode, name, self._counts[name])
        key, inp, outp, wrong = self._impl[name]
        mode = self.modes[name]
        if mode == "dead":
            return ToolResult(False, error="API not working (status 6)")
        if mode == "flaky" and u < self.p_flaky:
            return ToolResult(False, error="Too many requests (status 10)")
        if wrong:
            if u < self.p_distractor_error:
                return ToolResult(False, error="message error (status 12)")
            return ToolResult(True, {outp: f"{outp}:{_hx(self.seed, 'wrong', name, arguments[inp])}"})
        return ToolResult(True, {outp: self.value(key, arguments[inp])})

    def make_tasks(
        self, n: int, seed: int, min_steps: int = 2, max_steps: int = 4, prefix: str = "t"
    ) -> list[Task]:
        """``n`` chain tasks of ``min_steps``–``max_steps`` capabilities whose outputs feed the next input."""
        if not 1 <= min_steps <= max_steps:
            raise ValueError(f"need 1 <= min_steps <= max_steps, got {min_steps}, {max_steps}")
        rng = np.random.default_rng([self.seed, 2, int(seed)])
        by_input: dict[str, list[str]] = {}
        for key, (_, inp, _, _) in self.capabilities.items():
            by_input.setdefault(inp, []).append(key)
        keys = list(self.capabilities)
        tasks: list[Task] = []
        tries = 0
        while len(tasks) < n:
            tries += 1
            if tries > 1000 * max(n, 1):
                raise ValueError(f"cannot build tasks of >= {min_steps} steps from this capability set")
            length = int(rng.integers(min_steps, max_steps + 1))
            chain = [keys[int(rng.integers(len(keys)))]]
            while len(chain) < length:
                nxt = [k for k in by_input.get(self.capabilities[chain[-1]][2], []) if k not in chain]
                if not nxt:
                    break
                chain.append(nxt[int(rng.integers(len(nxt)))])
            if len(chain) < min_steps:
                continue
            inp0 = self.capabilities[chain[0]][1]
            x = f"{inp0}:{int(rng.integers(10**6)):06d}"
            goals, val = [], x
            for k in chain:
                outp = self.capabilities[k][2]
                phrases = GOAL_PHRASES[k] if self.goal_bank == "user" else self.capabilities[k][3]
                lead = _ASKS if self.goal_bank == "user" else _VERBS
                goals.append(
                    Goal(
                        f"{lead[rng.integers(len(lead))]} {phrases[rng.integers(3)]}.",
                        capability=k,
                        output=outp,
                    )
                )
                val = self.value(k, val)
            query = f"Given the {inp0.replace('_', ' ')} {x!r}: " + " Then ".join(g.text for g in goals)
            tasks.append(
                Task(f"{prefix}{seed}-{len(tasks)}", query, tuple(goals), {inp0: x}, goals[-1].output, val)
            )
        return tasks


# ---------------------------------------------------------------------------------------------------------
# BFCL: real function docs and executable API classes from the bfcl-eval wheel
# ---------------------------------------------------------------------------------------------------------
BFCL_CLASSES = {
    "math_api": "MathAPI",
    "travel_booking": "TravelAPI",
    "vehicle_control": "VehicleControlAPI",
    "trading_bot": "TradingBot",
    "message_api": "MessageAPI",
    "ticket_api": "TicketAPI",
    "posting_api": "TwitterAPI",
    "gorilla_file_system": "GorillaFileSystem",
}
_BFCL_SRC = "bfcl_eval.eval_checker.multi_turn_eval.func_source_code"


def _bfcl_root() -> Path:
    try:
        import bfcl_eval
    except ImportError:
        raise ImportError(
            "BFCLToolEnv needs the bfcl-eval wheel: `pip install --no-deps bfcl-eval` (its declared dependencies "
            "pin old numpy/vllm; the API classes need only the standard library and mpmath)"
        ) from None
    return Path(bfcl_eval.__file__).parent


def _jsonable(x: Any) -> Any:
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, (str, int, bool)) or x is None:
        return x
    try:
        return float(x)  # mpmath.mpf, Decimal, numpy scalars
    except (TypeError, ValueError):
        return str(x)


# goal templates over stateless BFCL functions: name → (text template, output field, parameter builder)
_BFCL_STEPS = {
    "add": ("Add {b} to {x}.", "result", lambda x, r: {"a": x, "b": r.choice([2.0, 3.5, 10.0, 7.25])}),
    "multiply": (
        "Multiply {x} by {b}.",
        "result",
        lambda x, r: {"a": x, "b": r.choice([2.0, 3.0, 0.5, 12.0])},
    ),
    "divide": ("Divide {x} by {b}.", "result", lambda x, r: {"a": x, "b": r.choice([2.0, 4.0, 5.0, 8.0])}),
    "subtract": ("Subtract {b} from {x}.", "result", lambda x, r: {"a": x, "b": r.choice([1.0, 0.5, 2.0])}),
    "power": (
        "Raise {x} to the power of {exponent}.",
        "result",
        lambda x, r: {"base": x, "exponent": r.choice([2.0, 0.5])},
    ),
    "square_root": (
        "Take the square root of {x} keeping {precision} significant digits.",
        "result",
        lambda x, r: {"number": x, "precision": 10},
    ),
    "absolute_value": ("Give the magnitude of {x} ignoring its sign.", "result", lambda x, r: {"number": x}),
    "round_number": (
        "Round {x} to {decimal_places} decimal places.",
        "result",
        lambda x, r: {"number": x, "decimal_places": r.choice([1, 2])},
    ),
    "gallon_to_liter": ("Convert {x} gallons of fuel into liters.", "liter", lambda x, r: {"gallon": x}),
    "liter_to_gallon": ("Express {x} liters of fuel in gallons.", "gallon", lambda x, r: {"liter": x}),
    "compute_exchange_rate": (
        "Exchange {x} {base_currency} into {target_currency}.",
        "exchanged_value",
        lambda x, r: {
            "value": x,
            "base_currency": "USD",
            "target_currency": r.choice(["EUR", "GBP", "JPY", "CAD"]),
        },
    ),
}
_BFCL_INPUT_PARAM = {
    "add": "a",
    "multiply": "a",
    "divide": "a",
    "subtract": "a",
    "power": "base",
    "square_root": "number",
    "absolute_value": "number",
    "round_number": "number",
    "gallon_to_liter": "gallon",
    "liter_to_gallon": "liter",
    "compute_exchange_rate": "value",
}


class BFCLToolEnv:
    """The BFCL multi-turn API classes as a tool backend: real function docs (converted to OpenAI schemas) and
    their real Python implementations. Each task gets fresh class instances (the classes are stateful)."""

    def __init__(self, classes: Sequence[str] | None = None):
        root = _bfcl_root()
        classes = list(classes) if classes is not None else list(BFCL_CLASSES)
        bad = [c for c in classes if c not in BFCL_CLASSES]
        if bad:
            raise ValueError(f"classes must be among {sorted(BFCL_CLASSES)}, got {bad}")
        self.classes = classes
        self.tools: list[Tool] = []
        self._owner: dict[str, str] = {}
        for mod in classes:
            path = root / "data" / "multi_turn_func_doc" / f"{mod}.json"
            for line in path.read_text(encoding="utf-8").splitlines():
                if line.strip():
                    t = bfcl_to_openai(json.loads(line), category=BFCL_CLASSES[mod])
                    if t.name in self._owner:
                        raise ValueError(f"duplicate BFCL function name {t.name!r}")
                    self.tools.append(t)
                    self._owner[t.name] = mod
        self._by_name = {t.name: t for t in self.tools}
        self.labels = {t.name: t.name for t in self.tools}
        self._instances: dict[str, Any] = {}

    def _instance(self, mod: str) -> Any:
        if mod not in self._instances:
            cls = getattr(importlib.import_module(f"{_BFCL_SRC}.{mod}"), BFCL_CLASSES[mod])
            obj = cls()
            if hasattr(obj, "_load_scenario"):
                try:
                    obj._load_scenario({}, long_context=False)
                except (
                    Exception
                ):  # some classes need a scenario; their calls then fail as a real server would
                    pass
            self._instances[mod] = obj
        return self._instances[mod]

    def reset(self, task_id: str) -> None:
        self._instances = {}

    def call(self, name: str, arguments: dict) -> ToolResult:
        tool, rejected = _lookup(self._by_name, name, arguments)
        if rejected is not None:
            return rejected
        try:
            out = getattr(self._instance(self._owner[name]), tool.meta["bfcl_name"])(**arguments)
        except Exception as e:  # a real API class raising is a failed call, not a crashed run
            return ToolResult(False, error=f"{type(e).__name__}: {e}")
        out = _jsonable(out if isinstance(out, dict) else {"result": out})
        if "error" in out:
            return ToolResult(False, output=out, error=str(out["error"]))
        return ToolResult(True, out)

    def make_tasks(
        self, n: int, seed: int, min_steps: int = 2, max_steps: int = 3, prefix: str = "bfcl"
    ) -> list[Task]:
        """``n`` numeric chains over the stateless BFCL functions (math, fuel-unit conversion, currency exchange);
        each later step consumes the previous result through a :class:`Ref`. Ground truth comes from calling the
        real functions on fresh instances."""
        usable = [f for f in _BFCL_STEPS if f in self._by_name]
        if not usable:
            raise ValueError(
                "BFCLToolEnv.make_tasks needs the math_api / vehicle_control / travel_booking classes"
            )
        import random

        r = random.Random(f"bfcl-{seed}")
        tasks: list[Task] = []
        while len(tasks) < n:
            steps = [r.choice(usable) for _ in range(r.randint(min_steps, max_steps))]
            x0 = float(r.choice([3, 4, 6, 9, 12.5, 16, 20, 42]))
            self.reset("truth")
            goals, prev, ok, val = [], None, True, x0
            for i, f in enumerate(steps):
                text, out_field, build = _BFCL_STEPS[f]
                args = build(val, r)
                shown = {**args, "x": ("the previous result" if i else f"{x0:g}")}
                bindings = dict(args)
                if i:
                    bindings[_BFCL_INPUT_PARAM[f]] = Ref(i - 1, prev)
                res = self.call(f, args)
                if (
                    not res.ok
                    or out_field not in res.output
                    or not math.isfinite(float(res.output[out_field]))
                ):
                    ok = False
                    break
                val = float(res.output[out_field])
                goals.append(Goal(text.format(**shown), bindings=bindings, capability=f, output=out_field))
                prev = out_field
            if not ok:
                continue
            query = " Then ".join(g.text for g in goals)
            tasks.append(Task(f"{prefix}{seed}-{len(tasks)}", query, tuple(goals), {}, goals[-1].output, val))
        return tasks


class HTTPToolBackend:
    """A user's tool server: ``POST url`` with ``{"name": ..., "arguments": {...}}``; a JSON reply with an
    ``error`` field (or a non-2xx status, a timeout, a non-JSON body) is a failed call."""

    def __init__(self, url: str, tools: Sequence[Tool], timeout: float = 30.0, headers: dict | None = None):
        if not str(url).startswith(("http://", "https://")):
            raise ValueError(f"url must start with http:// or https://, got {url!r}")
        if not (isinstance(timeout, (int, float)) and timeout > 0):
            raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
        self.url, self.timeout, self.headers = url, float(timeout), dict(headers or {})
        self.tools = list(tools)
        self._by_name = {t.name: t for t in self.tools}

    def reset(self, task_id: str) -> None:
        pass

    def call(self, name: str, arguments: dict) -> ToolResult:
        import urllib.error
        import urllib.request

        tool, rejected = _lookup(self._by_name, name, arguments)
        if rejected is not None:
            return rejected
        body = json.dumps({"name": name, "arguments": arguments}).encode()
        req = urllib.request.Request(
            self.url, data=body, headers={"Content-Type": "application/json", **self.headers}
        )
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                out = json.loads(resp.read().decode("utf-8"))
        except (urllib.error.URLError, TimeoutError, OSError, json.JSONDecodeError, UnicodeDecodeError) as e:
            return ToolResult(False, error=f"{type(e).__name__}: {e}")
        if not isinstance(out, dict):
            out = {"result": out}
        if out.get("error"):
            return ToolResult(False, output=out, error=str(out["error"]))
        return ToolResult(True, out)
