#!/usr/bin/env python3
"""Validate a directory of compaction scenarios against the shared format.

Usage: python3 scenarios/tools/validate.py [DIR|FILE] [--strict] [--markdown]

DIR defaults to scenarios/compaction. A directory of live agentic worlds
(scenarios/agentic: objects with "endpoints") is checked as worlds: the format
the Rust loader parses, plus the rules of a long world (12+ calls on the route,
facts from 12+ endpoints, one contradiction, one date-ordered chain, an early
fact, wrong-value traps, a window that fills in 3-4 rounds) as warnings.
Two kinds of findings:

* errors — the file breaks the format contract (what `mf plan` / the Rust
  parser would reject, plus a few structural rules of the contract such as
  tool_call_id naming an earlier call): always make the exit status 1.
* warnings — the file is valid but weak as a benchmark item (a probe answerable
  from the pinned zone and the last 2 messages, a keyword that also appears in
  the probe question, a required keyword that never occurs in the conversation,
  a size outside the length's target, ...). With --strict they are errors too;
  this team's own set is kept at zero warnings. A scenario exported from an
  investigation (its `origin` names it) keeps its real size: the size targets
  do not apply to it, every other rule does.

Wrong answers for the likelihood scorer's choice test (a probe's optional `wrong`,
a world probe's optional `wrong_answers`) are errors when empty, repeated, equal
to the reference or holding every required keyword, and warnings when their
length is more than twice or less than half the reference's.

Prints a per-scenario table (id, class, length, messages, approx tokens,
probes per dimension) and the totals per dimension. --markdown prints the
table as Markdown (used for scenarios/README.md).
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

CLASSES = ["lookup", "multi_hop", "exploratory", "aggregation", "contradiction", "temporal"]
LENGTHS = ["short", "medium", "long"]
ROLES = ["system", "user", "assistant", "tool"]
DIMENSIONS = ["fact_retention", "causal_fidelity", "contradiction_awareness", "temporal_ordering", "entity_recall"]
DIM_SHORT = {"fact_retention": "fact", "causal_fidelity": "causal", "contradiction_awareness": "contra",
             "temporal_ordering": "temporal", "entity_recall": "entity"}

TOP_KEYS = {"id", "class", "length", "title", "messages", "probes", "origin"}
# `origin` marks a scenario exported from an investigation (`mf replay ID --export DIR`): it keeps the investigation's
# real size, so the size targets below (design rules for written scenarios) do not apply to it.
TOP_REQUIRED = TOP_KEYS - {"origin"}
ORIGIN_KEYS = {"investigation": int, "model": str, "transcript_messages": int}
MSG_KEYS = {"id", "role", "content", "tool_calls", "tool_call_id", "name", "is_error"}
CALL_KEYS = {"id", "name", "arguments"}
PROBE_KEYS = {"id", "question", "dimension", "required", "partial", "reference", "wrong"}
# Wrong answers for the likelihood scorer's choice test: how many a probe may carry, and how far a wrong answer's length
# may stray from the reference's before it warns (a much shorter or longer answer is told apart by its length, not by
# the fact it states).
WRONG_ANSWERS = (1, 4)
WRONG_LENGTH_FACTOR = 2.0

# Size targets per length: (min messages, max messages, min tokens, max tokens), ~4 chars/token.
TARGETS = {"short": (8, 14, 600, 1000), "medium": (24, 40, 1500, 2500), "long": (60, 200, 3000, 5000)}
RECENT = 2  # messages kept verbatim by every condition (the "recent" zone)


def approx_tokens(messages: list) -> int:
    chars = 0
    for m in messages:
        if not isinstance(m, dict):
            continue
        c = m.get("content")
        chars += len(c) if isinstance(c, str) else 0
        for tc in m.get("tool_calls") or []:
            if isinstance(tc, dict):
                chars += len(str(tc.get("name", ""))) + len(json.dumps(tc.get("arguments", {})))
    return round(chars / 4)


def message_text(m: dict) -> str:
    text = m.get("content") if isinstance(m.get("content"), str) else ""
    for tc in m.get("tool_calls") or []:
        if isinstance(tc, dict):
            text += "\n" + json.dumps(tc.get("arguments", {}), ensure_ascii=False)
    return text


def variants(group) -> list[str]:
    return group if isinstance(group, list) else [group]


def group_in(group, text_lower: str) -> bool:
    return any(v.lower() in text_lower for v in variants(group) if isinstance(v, str))


def check_wrong_answers(checker: "Checker", where: str, answers, reference, required: list) -> None:
    """A probe's wrong answers (compaction ``wrong``, world ``wrong_answers``): 1-4 distinct non-empty strings, none the
    reference, none holding every required keyword (the keyword scorer would give it full marks, so it is not wrong);
    a length more than WRONG_LENGTH_FACTOR away from the reference's warns."""
    if not isinstance(answers, list):
        checker.err(where, "must be an array of strings")
        return
    lo, hi = WRONG_ANSWERS
    if not lo <= len(answers) <= hi:
        checker.err(where, f"{len(answers)} wrong answers; give {lo}-{hi} (or leave the field out)")
    ref = reference.strip() if isinstance(reference, str) else ""
    seen: set[str] = set()
    for j, a in enumerate(answers):
        w = f"{where}[{j}]"
        if not isinstance(a, str) or not a.strip():
            checker.err(w, "must be a non-empty string")
            continue
        key = a.strip().lower()
        if key in seen:
            checker.err(w, "repeats an earlier wrong answer")
        seen.add(key)
        if ref and key == ref.lower():
            checker.err(w, "is the reference answer")
            continue
        if required and all(group_in(g, key) for g in required):
            checker.err(w, "holds every required keyword, so it would score as right")
        if ref and not 1 / WRONG_LENGTH_FACTOR <= len(a.strip()) / len(ref) <= WRONG_LENGTH_FACTOR:
            checker.warn(w, f"{len(a.strip())} characters against the reference's {len(ref)}: the length gives it away")


class Checker:
    def __init__(self, path: Path):
        self.path = path
        self.errors: list[str] = []
        self.warnings: list[str] = []

    def err(self, where: str, msg: str) -> None:
        self.errors.append(f"{self.path.name}: {where}: {msg}")

    def warn(self, where: str, msg: str) -> None:
        self.warnings.append(f"{self.path.name}: {where}: {msg}")

    # ------------------------------------------------------------------
    def check(self) -> dict | None:
        try:
            doc = json.loads(self.path.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            self.err("file", f"not readable JSON: {e}")
            return None
        if not isinstance(doc, dict):
            self.err("file", "top level must be an object")
            return None
        for k in sorted(set(doc) - TOP_KEYS):
            self.err(k, "unknown field")
        for k in sorted(TOP_REQUIRED - set(doc)):
            self.err(k, "missing field")
        for k in ("id", "title"):
            if k in doc and (not isinstance(doc[k], str) or not doc[k].strip()):
                self.err(k, "must be a non-empty string")
        if isinstance(doc.get("id"), str) and doc["id"] != self.path.stem:
            self.warn("id", f"{doc['id']!r} differs from the file name {self.path.stem!r}")
        if "class" in doc and doc["class"] not in CLASSES:
            self.err("class", f"{doc['class']!r} is not one of {CLASSES}")
        if "length" in doc and doc["length"] not in LENGTHS:
            self.err("length", f"{doc['length']!r} is not one of {LENGTHS}")
        msgs = doc.get("messages")
        if not isinstance(msgs, list) or not msgs:
            self.err("messages", "must be a non-empty array")
            msgs = []
        question_idx = self.check_messages(msgs)
        probes = doc.get("probes")
        if not isinstance(probes, list):
            self.err("probes", "must be an array")
            probes = []
        self.check_probes(probes, msgs, question_idx)
        if "origin" in doc:
            self.check_origin(doc["origin"], msgs)
        else:
            self.check_size(doc, msgs, probes)
        return doc

    def check_origin(self, origin, msgs: list) -> None:
        if not isinstance(origin, dict):
            self.err("origin", "must be an object")
            return
        for k in sorted(set(origin) - set(ORIGIN_KEYS)):
            self.err(f"origin.{k}", "unknown field")
        for k, t in ORIGIN_KEYS.items():
            v = origin.get(k)
            if not isinstance(v, t) or isinstance(v, bool):
                self.err(f"origin.{k}", f"missing or not a {t.__name__}")
        n = origin.get("transcript_messages")
        if isinstance(n, int) and n < len(msgs):
            self.err("origin.transcript_messages", f"{n} is fewer than the {len(msgs)} messages the file holds")

    # ------------------------------------------------------------------
    def check_messages(self, msgs: list) -> int | None:
        call_names: dict[str, str] = {}
        answered: Counter = Counter()
        ids: set[str] = set()
        question_idx = None
        first_non_system = None
        for i, m in enumerate(msgs):
            w = f"messages[{i}]"
            if not isinstance(m, dict):
                self.err(w, "must be an object")
                continue
            for k in sorted(set(m) - MSG_KEYS):
                self.err(f"{w}.{k}", "unknown field")
            role = m.get("role")
            if role not in ROLES:
                self.err(f"{w}.role", f"{role!r} is not one of {ROLES}")
            if not isinstance(m.get("content"), str):
                self.err(f"{w}.content", "missing or not a string")
            mid = m.get("id", f"m{i}")
            if not isinstance(mid, str) or not mid:
                self.err(f"{w}.id", "must be a non-empty string")
            elif mid in ids:
                self.err(f"{w}.id", f"duplicate message id {mid!r}")
            else:
                ids.add(mid)
            if role != "system" and first_non_system is None:
                first_non_system = i
            if role == "user" and question_idx is None:
                question_idx = i
            if "tool_calls" in m:
                if role != "assistant":
                    self.err(f"{w}.tool_calls", "only assistant messages may carry tool_calls")
                tcs = m["tool_calls"]
                if not isinstance(tcs, list):
                    self.err(f"{w}.tool_calls", "must be an array")
                    tcs = []
                for j, tc in enumerate(tcs):
                    tw = f"{w}.tool_calls[{j}]"
                    if not isinstance(tc, dict):
                        self.err(tw, "must be an object")
                        continue
                    for k in sorted(set(tc) - CALL_KEYS):
                        self.err(f"{tw}.{k}", "unknown field")
                    for k in ("id", "name"):
                        if not isinstance(tc.get(k), str) or not tc.get(k):
                            self.err(f"{tw}.{k}", "missing or not a non-empty string")
                    if not isinstance(tc.get("arguments"), dict):
                        self.err(f"{tw}.arguments", "missing or not a JSON object")
                    cid = tc.get("id")
                    if isinstance(cid, str):
                        if cid in call_names:
                            self.err(f"{tw}.id", f"duplicate tool call id {cid!r}")
                        call_names[cid] = tc.get("name") if isinstance(tc.get("name"), str) else ""
            for k in ("tool_call_id", "name", "is_error"):
                if k in m and role != "tool":
                    self.err(f"{w}.{k}", "only tool messages may carry this field")
            if "is_error" in m and not isinstance(m["is_error"], bool):
                self.err(f"{w}.is_error", "must be a boolean")
            if "name" in m and not isinstance(m["name"], str):
                self.err(f"{w}.name", "must be a string")
            if role == "tool":
                cid = m.get("tool_call_id")
                if cid is None:
                    self.warn(w, "tool message without tool_call_id")
                elif not isinstance(cid, str):
                    self.err(f"{w}.tool_call_id", "must be a string")
                elif cid not in call_names:
                    self.err(f"{w}.tool_call_id", f"{cid!r} names no tool call of an earlier assistant message")
                else:
                    answered[cid] += 1
                    if isinstance(m.get("name"), str) and m["name"] != call_names[cid]:
                        self.err(f"{w}.name", f"{m['name']!r} differs from the call's name {call_names[cid]!r}")
        if question_idx is None:
            self.err("messages", "no user message (the original question)")
        elif first_non_system != question_idx:
            self.warn("messages", "the first non-system message is not the user's question")
        for cid in call_names:
            if answered[cid] == 0:
                self.warn("messages", f"tool call {cid!r} has no result")
            elif answered[cid] > 1:
                self.warn("messages", f"tool call {cid!r} has {answered[cid]} results")
        return question_idx

    # ------------------------------------------------------------------
    def check_keyword(self, where: str, kw) -> bool:
        if isinstance(kw, str):
            if not kw.strip():
                self.err(where, "empty keyword")
                return False
            return True
        if isinstance(kw, list):
            if not kw:
                self.err(where, "empty list of variants")
                return False
            ok = True
            for v in kw:
                if not isinstance(v, str) or not v.strip():
                    self.err(where, "variants must be non-empty strings")
                    ok = False
            return ok
        self.err(where, "a keyword is a string or a list of strings")
        return False

    def check_probes(self, probes: list, msgs: list, question_idx: int | None) -> None:
        if not 2 <= len(probes) <= 3:
            self.warn("probes", f"{len(probes)} probes; the benchmark wants 2-3 per scenario")
        all_text = [message_text(m).lower() if isinstance(m, dict) else "" for m in msgs]
        q = question_idx if question_idx is not None else 0
        pinned = "\n".join(all_text[: q + 1])
        middle = "\n".join(all_text[q + 1: max(q + 1, len(msgs) - RECENT)])
        kept = pinned + "\n" + "\n".join(all_text[max(q + 1, len(msgs) - RECENT):])
        ids = set()
        for i, p in enumerate(probes):
            w = f"probes[{i}]"
            if not isinstance(p, dict):
                self.err(w, "must be an object")
                continue
            for k in sorted(set(p) - PROBE_KEYS):
                self.err(f"{w}.{k}", "unknown field")
            for k in ("id", "question", "reference"):
                if not isinstance(p.get(k), str) or not p.get(k, "").strip():
                    self.err(f"{w}.{k}", "missing or not a non-empty string")
            pid = p.get("id")
            if isinstance(pid, str):
                if pid in ids:
                    self.err(f"{w}.id", f"duplicate probe id {pid!r}")
                ids.add(pid)
            if p.get("dimension") not in DIMENSIONS:
                self.err(f"{w}.dimension", f"{p.get('dimension')!r} is not one of {DIMENSIONS}")
            req = p.get("required")
            part = p.get("partial")
            if not isinstance(req, list) or not req:
                self.err(f"{w}.required", "must be a non-empty array of keywords")
                req = []
            if not isinstance(part, list):
                self.err(f"{w}.partial", "must be an array of keywords")
                part = []
            elif not part:
                self.warn(f"{w}.partial", "no partial keywords")
            good_req = [g for j, g in enumerate(req) if self.check_keyword(f"{w}.required[{j}]", g)]
            good_part = [g for j, g in enumerate(part) if self.check_keyword(f"{w}.partial[{j}]", g)]
            if "wrong" in p:
                check_wrong_answers(self, f"{w}.wrong", p["wrong"], p.get("reference"), good_req)
            question = p.get("question", "") if isinstance(p.get("question"), str) else ""
            ql = question.lower()
            for kind, groups in (("required", good_req), ("partial", good_part)):
                for g in groups:
                    for v in variants(g):
                        if v.lower() in ql:
                            self.warn(f"{w}.{kind}", f"keyword {v!r} appears in the probe question (free credit)")
                        if len(v) < 3:
                            self.warn(f"{w}.{kind}", f"keyword {v!r} is shorter than 3 characters (matches by chance)")
            for g in good_req:
                if not group_in(g, middle):
                    self.warn(f"{w}.required", f"no variant of {variants(g)} occurs in the compressible middle of the conversation")
                if group_in(g, pinned):
                    self.warn(f"{w}.required", f"{variants(g)} occurs in the pinned zone (system prompt / question)")
            if good_req and all(group_in(g, kept) for g in good_req):
                self.warn(w, "answerable from the pinned zone + last 2 messages alone (forgetting not measurable)")
            elif any(group_in(g, kept) for g in good_req):
                hits = [variants(g)[0] for g in good_req if group_in(g, kept)]
                self.warn(w, f"required keyword(s) {hits} also occur in the pinned zone or the last 2 messages")

    # ------------------------------------------------------------------
    def check_size(self, doc: dict, msgs: list, probes: list) -> None:
        length = doc.get("length")
        if length not in TARGETS:
            return
        lo_m, hi_m, lo_t, hi_t = TARGETS[length]
        n = len(msgs)
        t = approx_tokens(msgs)
        if not lo_m <= n <= hi_m:
            self.warn("messages", f"{n} messages; target for {length} is {lo_m}-{hi_m}")
        if not lo_t <= t <= hi_t:
            self.warn("messages", f"~{t} tokens; target for {length} is {lo_t}-{hi_t}")


# ----------------------------------------------------------------------
# Live agentic worlds (scenarios/agentic/*.json): the format that
# crates/mf-bench/src/agentic/world.rs parses. Errors are what the Rust loader
# refuses too; warnings are the design rules of a long world (12+ calls), made
# errors by --strict.

WORLD_KEYS = {"id", "title", "system", "question", "plain_question", "route", "endpoints", "probes"}
WORLD_REQUIRED = {"id", "title", "question", "endpoints", "probes"}
ENDPOINT_KEYS = {"path", "status", "body"}
WPROBE_KEYS = {"id", "fact", "source", "required", "partial", "wrong", "wrong_answers", "reference", "kind"}
WPROBE_REQUIRED = {"id", "fact", "source", "required", "reference"}
PROBE_KINDS = ["fact", "contradiction", "order"]
LONG_ROUTE = 12
# The benchmark's defaults (bench-forgetting agentic): C, G, result cut.
DEFAULT_CTX, DEFAULT_RESERVE, DEFAULT_RESULT_CHARS = 2048, 192, 1200
CHARS_PER_TOKEN = 3.0  # compact JSON with these tokenizers, measured ~2.8-3.3
CALL_TOKENS = 45  # one fenced call with its URL, template included


def compact_json(v) -> str:
    return json.dumps(v, separators=(",", ":"), ensure_ascii=False)


class WorldChecker(Checker):
    def check(self) -> dict | None:
        try:
            doc = json.loads(self.path.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            self.err("file", f"not readable JSON: {e}")
            return None
        if not isinstance(doc, dict):
            self.err("file", "top level must be an object")
            return None
        for k in sorted(set(doc) - WORLD_KEYS):
            self.err(k, "unknown field")
        for k in sorted(WORLD_REQUIRED - set(doc)):
            self.err(k, "missing field")
        if isinstance(doc.get("id"), str) and doc["id"] != self.path.stem:
            self.err("id", f"{doc['id']!r} differs from the file name {self.path.stem!r}")
        for k in ("title", "question"):
            if k in doc and (not isinstance(doc[k], str) or not doc[k].strip()):
                self.err(k, "must be a non-empty string")
        if "plain_question" in doc:
            plain = doc["plain_question"]
            if not isinstance(plain, str) or not plain.strip():
                self.err("plain_question", "must be a non-empty string (leave it out instead)")
            elif "{base}" in plain:
                self.err("plain_question", "names {base}: a person's question does not carry the server's address")
        question = doc.get("question") if isinstance(doc.get("question"), str) else ""
        if question and "{base}" not in question:
            self.err("question", "does not name the world's base URL ({base})")
        eps = doc.get("endpoints")
        if not isinstance(eps, list) or not eps:
            self.err("endpoints", "must be a non-empty array")
            eps = []
        bodies: dict[str, str] = {}
        for i, e in enumerate(eps):
            w = f"endpoints[{i}]"
            if not isinstance(e, dict):
                self.err(w, "must be an object")
                continue
            for k in sorted(set(e) - ENDPOINT_KEYS):
                self.err(f"{w}.{k}", "unknown field")
            if "body" not in e:
                self.err(f"{w}.body", "missing field")
            path = e.get("path")
            if not isinstance(path, str) or not path.startswith("/"):
                self.err(f"{w}.path", f"{path!r} does not start with /")
                continue
            if path in bodies:
                self.err(f"{w}.path", f"{path!r} is listed twice")
            status = e.get("status", 200)
            if not isinstance(status, int) or not 100 <= status <= 599:
                self.err(f"{w}.status", f"{status!r} is not an HTTP status")
            bodies[path] = compact_json(e.get("body"))
            if len(bodies[path]) > DEFAULT_RESULT_CHARS:
                self.warn(f"{w}.body", f"{len(bodies[path])} characters: cut at the default {DEFAULT_RESULT_CHARS}")
        route = doc.get("route", [])
        if not isinstance(route, list) or not all(isinstance(r, str) for r in route):
            self.err("route", "must be an array of endpoint paths")
            route = []
        for j, r in enumerate(route):
            if r not in bodies:
                self.err(f"route[{j}]", f"{r!r} is not an endpoint of this world")
            if r in route[:j]:
                self.err(f"route[{j}]", f"{r!r} is on the route twice")
        if route and question and any(("{base}" + r) not in question for r in route) and route[0] not in question:
            self.warn("question", "names neither the route's URLs nor its first one")
        probes = doc.get("probes")
        if not isinstance(probes, list) or not probes:
            self.err("probes", "must be a non-empty array")
            probes = []
        self.check_world_probes(probes, bodies, route, question)
        if len(route) >= LONG_ROUTE:
            self.check_long(doc, probes, bodies, route)
        return doc

    def check_world_probes(self, probes: list, bodies: dict, route: list, question: str) -> None:
        ids = set()
        ql = question.lower()
        for i, p in enumerate(probes):
            w = f"probes[{i}]"
            if not isinstance(p, dict):
                self.err(w, "must be an object")
                continue
            for k in sorted(set(p) - WPROBE_KEYS):
                self.err(f"{w}.{k}", "unknown field")
            for k in sorted(WPROBE_REQUIRED - set(p)):
                self.err(f"{w}.{k}", "missing field")
            if p.get("id") in ids:
                self.err(f"{w}.id", f"{p.get('id')!r} is used twice")
            ids.add(p.get("id"))
            if not isinstance(p.get("reference"), str) or not p["reference"].strip():
                self.err(f"{w}.reference", "empty")
            if p.get("kind", "fact") not in PROBE_KINDS:
                self.err(f"{w}.kind", f"{p.get('kind')!r} is not one of {PROBE_KINDS}")
            req = p.get("required") if isinstance(p.get("required"), list) else []
            if not req:
                self.err(f"{w}.required", "a probe needs at least one required keyword")
            src = p.get("source")
            body = bodies.get(src, "").lower() if isinstance(src, str) else ""
            if src not in bodies:
                self.err(f"{w}.source", f"{src!r} is not an endpoint of this world")
            elif route and src not in route:
                self.warn(f"{w}.source", f"{src!r} is not on the route (a route-driven run never fetches it)")
            for j, g in enumerate(req):
                if self.check_keyword(f"{w}.required[{j}]", g) and src in bodies and not group_in(g, body):
                    self.err(f"{w}.required[{j}]", f"{variants(g)} is not in the body of {src}")
            if len(route) >= LONG_ROUTE and req and all(group_in(g, ql) for g in req if self.check_keyword(f"{w}.required", g)):
                self.warn(f"{w}.required", "every required keyword is in the question (answerable without a call)")
            ref = p.get("reference", "").lower() if isinstance(p.get("reference"), str) else ""
            for j, g in enumerate(p.get("wrong", []) or []):
                if self.check_keyword(f"{w}.wrong[{j}]", g) and group_in(g, ref):
                    self.err(f"{w}.wrong[{j}]", "a wrong value appears in the reference answer")
            for j, g in enumerate(p.get("partial", []) or []):
                self.check_keyword(f"{w}.partial[{j}]", g)
            if "wrong_answers" in p:
                good_req = [g for g in req if isinstance(g, (str, list)) and all(isinstance(v, str) and v.strip() for v in variants(g))]
                check_wrong_answers(self, f"{w}.wrong_answers", p["wrong_answers"], p.get("reference"), good_req)

    def check_long(self, doc: dict, probes: list, bodies: dict, route: list) -> None:
        good = [p for p in probes if isinstance(p, dict)]
        sources = {p.get("source") for p in good}
        if len(sources) < LONG_ROUTE:
            self.warn("probes", f"the answer needs facts from {len(sources)} endpoints; a long world needs {LONG_ROUTE}+")
        kinds = Counter(p.get("kind", "fact") for p in good)
        for k in ("contradiction", "order"):
            if kinds[k] == 0:
                self.warn("probes", f"no probe of kind {k!r}")
        early = [p.get("id") for p in good if p.get("source") in route[: max(1, len(route) // 3)]]
        if not early:
            self.warn("probes", "no fact from the first third of the route (forgetting would not be tested)")
        if sum(1 for p in good if p.get("wrong")) < 3:
            self.warn("probes", "fewer than 3 probes carry wrong-value traps")
        for i, p in enumerate(good):
            others = [b.lower() for path, b in bodies.items() if path != p.get("source")]
            if not any(all(not group_in(g, b) for b in others) for g in p.get("required", [])):
                self.warn(f"probes[{i}].required", "every required keyword also occurs on another endpoint (retention is ambiguous)")
        # When does the window fill? The prompt grows by a call and a result per round.
        budget = DEFAULT_CTX - DEFAULT_RESERVE
        tokens = (len(doc.get("system", "") or "") + len(doc.get("question", "")) + 60) / CHARS_PER_TOKEN
        full_at = None
        for n, r in enumerate(route, start=1):
            tokens += CALL_TOKENS + (min(len(bodies.get(r, "")), DEFAULT_RESULT_CHARS) + 40) / CHARS_PER_TOKEN
            if tokens > budget:
                full_at = n
                break
        if full_at is None or not 3 <= full_at <= 5:
            self.warn("route", f"the default window (C={DEFAULT_CTX}, G={DEFAULT_RESERVE}) is estimated to fill after "
                               f"{full_at or 'more than ' + str(len(route))} results; a long world fills it in 3-4 rounds")


def main_worlds(files: list, strict: bool) -> int:
    errors: list[str] = []
    warnings: list[str] = []
    print(f"{'world':<24} {'calls':>5} {'endpoints':>9} {'probes':>6} {'sources':>7}  kinds")
    for f in files:
        c = WorldChecker(f)
        doc = c.check()
        errors += c.errors
        warnings += c.warnings
        if doc is None:
            continue
        probes = [p for p in doc.get("probes", []) if isinstance(p, dict)]
        kinds = Counter(p.get("kind", "fact") for p in probes)
        print(f"{str(doc.get('id')):<24} {len(doc.get('route', []) or []):>5} {len(doc.get('endpoints', [])):>9} {len(probes):>6} "
              f"{len({p.get('source') for p in probes}):>7}  " + ", ".join(f"{k} {v}" for k, v in sorted(kinds.items())))
    for w in warnings:
        print(("error (strict): " if strict else "warning: ") + w)
    for e in errors:
        print("error: " + e)
    print(f"{len(errors)} errors, {len(warnings)} warnings")
    return 1 if errors or (strict and warnings) else 0


def main(argv: list[str]) -> int:
    strict = "--strict" in argv
    markdown = "--markdown" in argv
    args = [a for a in argv if not a.startswith("--")]
    root = Path(args[0]) if args else Path(__file__).resolve().parent.parent / "compaction"
    files = sorted(root.glob("*.json")) if root.is_dir() else [root]
    if not files:
        print(f"no *.json files in {root}", file=sys.stderr)
        return 1
    # A directory of live worlds (objects with "endpoints") is checked as worlds.
    def is_world(f: Path) -> bool:
        try:
            return isinstance(d := json.loads(f.read_text()), dict) and "endpoints" in d
        except (OSError, UnicodeDecodeError, json.JSONDecodeError):
            return root.name == "agentic"
    if all(is_world(f) for f in files):
        return main_worlds(files, strict)
    rows = []
    errors: list[str] = []
    warnings: list[str] = []
    seen_ids: dict[str, str] = {}
    totals: Counter = Counter()
    cells: Counter = Counter()
    for f in files:
        c = Checker(f)
        doc = c.check()
        errors += c.errors
        warnings += c.warnings
        if doc is None:
            continue
        sid = doc.get("id")
        if isinstance(sid, str):
            if sid in seen_ids:
                errors.append(f"{f.name}: id: {sid!r} also used by {seen_ids[sid]}")
            seen_ids[sid] = f.name
        dims = Counter(p.get("dimension") for p in doc.get("probes", []) if isinstance(p, dict))
        totals.update(dims)
        cells[(doc.get("class"), doc.get("length"))] += 1
        msgs = doc.get("messages") if isinstance(doc.get("messages"), list) else []
        rows.append((sid, doc.get("class"), doc.get("length"), len(msgs), approx_tokens(msgs),
                     sum(dims.values()), dims))

    order = {(k, l): (CLASSES.index(k) if k in CLASSES else 99, LENGTHS.index(l) if l in LENGTHS else 99)
             for _, k, l, *_ in rows}
    rows.sort(key=lambda r: order[(r[1], r[2])])
    dim_cols = [DIM_SHORT[d] for d in DIMENSIONS]
    if markdown:
        print("| id | class | length | messages | ~tokens | probes | " + " | ".join(dim_cols) + " |")
        print("| --- | --- | --- | ---: | ---: | ---: | " + " | ".join("---:" for _ in dim_cols) + " |")
        for sid, k, l, n, t, np, dims in rows:
            print(f"| {sid} | {k} | {l} | {n} | {t} | {np} | " + " | ".join(str(dims.get(d, 0)) for d in DIMENSIONS) + " |")
        print(f"| **total** | | | {sum(r[3] for r in rows)} | {sum(r[4] for r in rows)} | {sum(r[5] for r in rows)} | "
              + " | ".join(str(totals.get(d, 0)) for d in DIMENSIONS) + " |")
    else:
        head = f"{'id':<22} {'class':<14} {'length':<7} {'msgs':>4} {'~tok':>5} {'probes':>6}  " + " ".join(f"{c:>8}" for c in dim_cols)
        print(head)
        print("-" * len(head))
        for sid, k, l, n, t, np, dims in rows:
            print(f"{str(sid):<22} {str(k):<14} {str(l):<7} {n:>4} {t:>5} {np:>6}  " + " ".join(f"{dims.get(d, 0):>8}" for d in DIMENSIONS))
        print("-" * len(head))
        print(f"{'total':<22} {'':<14} {'':<7} {sum(r[3] for r in rows):>4} {sum(r[4] for r in rows):>5} {sum(r[5] for r in rows):>6}  "
              + " ".join(f"{totals.get(d, 0):>8}" for d in DIMENSIONS))
    print()
    print(f"{len(rows)} scenarios, {sum(totals.values())} probes: "
          + ", ".join(f"{d} {totals.get(d, 0)}" for d in DIMENSIONS))
    missing = [f"{k}-{l}" for k in CLASSES for l in LENGTHS if cells[(k, l)] == 0]
    if missing:
        print(f"class x length cells without a scenario: {', '.join(missing)}")
    for w in warnings:
        print(("error (strict): " if strict else "warning: ") + w)
    for e in errors:
        print("error: " + e)
    print(f"{len(errors)} errors, {len(warnings)} warnings")
    if errors or (strict and warnings):
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
