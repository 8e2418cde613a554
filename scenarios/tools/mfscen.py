"""Small builder for the compaction scenarios in ``scenarios/compaction``.

The scenario texts live in ``scen_<class>.py`` next to this file; this module
only gives them a compact way to write a conversation (``Scenario``) and a
seeded generator of *filler rounds* (plausible, irrelevant tool calls and
results that push the facts of a long conversation back).

Everything is deterministic: the filler of a scenario is drawn from
``random.Random(seed)``, so ``python3 scenarios/tools/build.py`` rewrites the
JSON files byte for byte.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

OUT_DIR = Path(__file__).resolve().parent.parent / "compaction"


def _dump(obj) -> str:
    """Tool results given as dicts/lists become compact one-line JSON text."""
    if isinstance(obj, str):
        return obj
    return json.dumps(obj, ensure_ascii=False)


class Scenario:
    """A conversation under construction, written in call order."""

    def __init__(self, sid: str, klass: str, length: str, title: str):
        self.sid = sid
        self.klass = klass
        self.length = length
        self.title = title
        self.messages: list[dict] = []
        self.probes: list[dict] = []
        self._next_call = 1
        self._call_names: dict[str, str] = {}
        self.filler_indices: list[int] = []
        self._filler_skip: dict[int, int] = {}  # hand-written prefix length per filler message

    # -- messages ---------------------------------------------------------
    def system(self, text: str) -> None:
        self.messages.append({"role": "system", "content": text})

    def user(self, text: str) -> None:
        self.messages.append({"role": "user", "content": text})

    def say(self, text: str) -> None:
        """An assistant message without tool calls (interpretation, answer)."""
        self.messages.append({"role": "assistant", "content": text})

    def calls(self, text: str, calls: list[tuple[str, dict]]) -> list[str]:
        """An assistant message issuing one or more tool calls; returns ids."""
        ids = []
        tcs = []
        for name, args in calls:
            cid = f"call_{self._next_call}"
            self._next_call += 1
            self._call_names[cid] = name
            tcs.append({"id": cid, "name": name, "arguments": args})
            ids.append(cid)
        self.messages.append({"role": "assistant", "content": text, "tool_calls": tcs})
        return ids

    def call(self, text: str, name: str, args: dict) -> str:
        return self.calls(text, [(name, args)])[0]

    def result(self, cid: str, content, is_error: bool = False) -> None:
        msg = {
            "role": "tool",
            "tool_call_id": cid,
            "name": self._call_names[cid],
            "content": _dump(content),
        }
        if is_error:
            msg["is_error"] = True
        self.messages.append(msg)

    def error(self, cid: str, text: str) -> None:
        self.result(cid, text, is_error=True)

    def step(self, text: str, name: str, args: dict, content, is_error: bool = False) -> str:
        """One call and its result."""
        cid = self.call(text, name, args)
        self.result(cid, content, is_error)
        return cid

    # -- filler -----------------------------------------------------------
    def filler(self, n: int, seed: int, ctx: dict, first_text: str | None = None) -> None:
        """Append ``n`` irrelevant call/result rounds drawn from ``seed``."""
        rng = random.Random(seed)
        order = list(range(len(TEMPLATES)))
        rng.shuffle(order)
        for i in range(n):
            tpl = TEMPLATES[order[i % len(order)]]
            text, name, args, content, is_err = tpl(rng, ctx)
            if i == 0 and first_text is not None:
                text = first_text + " " + text[0].lower() + text[1:]
            elif i > 0 and rng.random() < 0.55:
                text = rng.choice(REMARKS) + " " + text
            start = len(self.messages)
            self.step(text, name, args, content, is_err)
            self.filler_indices.extend([start, start + 1])
            if i == 0 and first_text is not None:
                self._filler_skip[start] = len(first_text)

    # -- probes -----------------------------------------------------------
    def probe(self, dimension: str, question: str, required: list, partial: list, reference: str,
              wrong: list[str] | None = None) -> None:
        """``wrong``: answers a forgetful reader would give, built from values of this same conversation (the other
        invoice, the superseded figure, the earlier owner) and phrased like the reference, so that only the fact tells
        them apart (the likelihood scorer's choice test)."""
        probe = {
            "id": f"p{len(self.probes) + 1}",
            "question": question,
            "dimension": dimension,
            "required": required,
            "partial": partial,
            "reference": reference,
        }
        if wrong:
            probe["wrong"] = list(wrong)
        self.probes.append(probe)

    # -- output -----------------------------------------------------------
    def to_json(self) -> dict:
        return {
            "id": self.sid,
            "class": self.klass,
            "length": self.length,
            "title": self.title,
            "messages": self.messages,
            "probes": self.probes,
        }

    def check_filler(self) -> None:
        """Filler must not contain a required probe keyword (no accidental or competing answers)."""
        variants = set()
        for p in self.probes:
            for group in p["required"]:
                for v in group if isinstance(group, list) else [group]:
                    variants.add(v.lower())
        for idx in self.filler_indices:
            m = self.messages[idx]
            content = m["content"][self._filler_skip.get(idx, 0):]
            text = (content + json.dumps(m.get("tool_calls", []))).lower()
            for v in variants:
                if v in text:
                    raise ValueError(f"{self.sid}: filler message {idx} contains required keyword {v!r}; change the seed or the keyword")

    def write(self, out_dir: Path = OUT_DIR) -> Path:
        self.check_filler()
        out_dir.mkdir(parents=True, exist_ok=True)
        path = out_dir / f"{self.sid}.json"
        path.write_text(json.dumps(self.to_json(), indent=2, ensure_ascii=False) + "\n")
        return path


# ---------------------------------------------------------------------------
# Filler templates. Each returns (assistant text, tool name, arguments,
# result content, is_error). ctx keys: host, services (list), ns, db, repo.
# ---------------------------------------------------------------------------

REMARKS = [
    "Nothing unusual there.",
    "That looks normal.",
    "No anomaly in that one.",
    "Fine, that is ruled out.",
    "Not related, as far as I can see.",
    "Healthy.",
    "OK, moving on.",
    "Nothing relevant.",
]


def _svc(rng, ctx):
    return rng.choice(ctx["services"])


def _ver(rng):
    return f"{rng.randint(1, 6)}.{rng.randint(0, 29)}.{rng.randint(0, 19)}"


def t_health(rng, ctx):
    svc = _svc(rng, ctx)
    body = {
        "service": svc,
        "status": "ok",
        "version": _ver(rng),
        "uptime_s": rng.randint(20_000, 3_000_000),
        "checks": {"db": "ok", "cache": "ok", "queue": rng.choice(["ok", "ok", "degraded-readonly=false"])},
    }
    return (f"I'll check the health endpoint of {svc}.", "http_get",
            {"url": f"http://{ctx['host']}/{svc}/healthz"}, body, False)


def t_pods(rng, ctx):
    svc = _svc(rng, ctx)
    lines = ["NAME                         READY   STATUS    RESTARTS   AGE"]
    for _ in range(rng.randint(2, 4)):
        suffix = "".join(rng.choice("abcdefghjkmnpqrstvwxz23456789") for _ in range(5))
        lines.append(f"{svc}-{rng.randint(5, 9)}c{rng.randint(10, 99)}f-{suffix:<8}   1/1     Running   0          {rng.randint(2, 19)}d")
    return (f"Let me list the {svc} pods.", "run_shell",
            {"cmd": f"kubectl get pods -n {ctx['ns']} -l app={svc}"}, "\n".join(lines), False)


def t_disk(rng, ctx):
    used = rng.randint(21, 63)
    size = rng.choice([100, 200, 250])
    used_g = size * used // 100
    data = rng.choice([500, 1000])
    dused = rng.randint(18, 70)
    out = (
        "Filesystem      Size  Used Avail Use% Mounted on\n"
        f"/dev/nvme0n1p1   {size}G  {used_g}G  {size - used_g}G  {used}% /\n"
        f"/dev/nvme1n1     {data}G  {data * dused // 100}G  {data - data * dused // 100}G  {dused}% /data\n"
        f"/dev/nvme0n1p15  105M  6.1M   99M   6% /boot/efi\n"
        f"tmpfs            {rng.choice([7, 15, 31])}G     0  {rng.choice([7, 15, 31])}G   0% /dev/shm\n"
        f"tmpfs            {rng.choice([1.6, 3.2, 6.3])}G  {rng.randint(1, 9)}.{rng.randint(0, 9)}M  {rng.choice([1.6, 3.2, 6.3])}G   1% /run"
    )
    return ("Quick check of disk usage on the host.", "run_shell", {"cmd": f"ssh {ctx['host']} df -h"}, out, False)


def t_grep_none(rng, ctx):
    pat = rng.choice(["OOMKilled", "segfault", "panic:", "too many open files", "certificate has expired", "deadlock detected"])
    svc = _svc(rng, ctx)
    files = [f"/var/log/{svc}/{svc}.log", f"/var/log/{svc}/{svc}.log.1", f"/var/log/{svc}/access.log"]
    body = {"pattern": pat, "matches": 0, "files_scanned": [{"path": f, "lines": rng.randint(2_000, 400_000)} for f in files],
            "bytes_scanned": rng.randint(2_000_000, 90_000_000), "elapsed_ms": rng.randint(80, 2400)}
    return (f"Searching the {svc} log for '{pat}'.", "grep_logs",
            {"pattern": pat, "path": f"/var/log/{svc}/*.log", "since": "24h"}, body, False)


def t_config(rng, ctx):
    svc = _svc(rng, ctx)
    body = (
        f"# /etc/{svc}/config.yaml\n"
        f"log_level: {rng.choice(['info', 'info', 'warn'])}\n"
        f"http:\n  listen: 0.0.0.0:{rng.choice([8080, 8000, 9090, 3000])}\n  read_timeout: {rng.choice([5, 10, 15])}s\n"
        f"pool:\n  max_conns: {rng.choice([16, 32, 64])}\n  idle_timeout: {rng.choice([60, 120, 300])}s\n"
        f"metrics:\n  enabled: true\n  path: /metrics"
    )
    return (f"Reading the {svc} config for anything odd.", "read_file", {"path": f"/etc/{svc}/config.yaml"}, body, False)


def t_cpu(rng, ctx):
    svc = _svc(rng, ctx)
    vals = [round(rng.uniform(0.08, 0.45), 2) for _ in range(4)]
    body = {
        "status": "success",
        "data": {"resultType": "matrix", "result": [{"metric": {"job": svc},
                 "values": [[f"-{45 - 15 * i}m", str(v)] for i, v in enumerate(vals)]}]},
    }
    return (f"Checking CPU of {svc} over the last hour.", "http_get",
            {"url": f"http://prometheus.{ctx['ns']}:9090/api/v1/query_range?query=rate(process_cpu_seconds_total{{job=\"{svc}\"}}[5m])"},
            body, False)


def t_gitlog(rng, ctx):
    msgs = ["docs: fix typo in runbook", "chore: bump linter to latest minor", "test: stabilise fixture clock",
            "ci: cache cargo registry between jobs", "docs: update on-call links", "refactor: rename config helper",
            "chore: regenerate lockfile", "style: reformat templates"]
    authors = ["a.berg", "s.mensah", "r.costa", "l.nguyen", "d.haas"]
    rng.shuffle(msgs)
    lines = []
    for k, m in enumerate(msgs[:5]):
        sha = "".join(rng.choice("0123456789abcdef") for _ in range(7))
        lines.append(f"{sha} {m} ({rng.choice(authors)}, {k + rng.randint(1, 3)} days ago)")
    return (f"Looking at the latest commits in {ctx['repo']}.", "run_shell",
            {"cmd": f"git -C /src/{ctx['repo']} log --format='%h %s (%an, %ar)' -5"}, "\n".join(lines), False)


def t_dns(rng, ctx):
    svc = _svc(rng, ctx)
    ips = [f"10.{rng.randint(60, 99)}.{rng.randint(1, 250)}.{rng.randint(2, 250)}" for _ in range(rng.randint(2, 3))]
    ans = "\n".join(f"{svc}.{ctx['ns']}.svc.cluster.local. 30 IN A {ip}" for ip in ips)
    out = (f";; ANSWER SECTION:\n{ans}\n"
           f";; Query time: {rng.randint(1, 4)} msec\n;; SERVER: 10.96.0.10#53(10.96.0.10) (UDP)\n;; MSG SIZE  rcvd: {rng.randint(90, 180)}")
    return (f"Confirming {svc} resolves.", "run_shell", {"cmd": f"dig +noall +answer +stats {svc}.{ctx['ns']}.svc.cluster.local"}, out, False)


def t_flags(rng, ctx):
    flags = ["dark_mode_v2", "new_search_ranking", "beta_exports", "compact_tables", "inline_help", "fast_login"]
    rng.shuffle(flags)
    body = {"flags": [{"key": f, "enabled": rng.random() < 0.5, "updated": f"{rng.randint(10, 90)} days ago"} for f in flags[:3]]}
    return ("Listing recently touched feature flags, in case one matters.", "http_get",
            {"url": f"http://{ctx['host']}/flags?sort=updated&limit=3"}, body, False)


def t_cert(rng, ctx):
    svc = _svc(rng, ctx)
    serial = "".join(rng.choice("0123456789ABCDEF") for _ in range(16))
    out = (f"subject=CN = {svc}.internal\nissuer=CN = Internal CA R{rng.randint(2, 4)}\n"
           f"serial={serial}\nX509v3 Subject Alternative Name: DNS:{svc}.internal, DNS:{svc}.{ctx['ns']}.svc\n"
           f"notBefore=2026-{rng.randint(1, 3):02d}-{rng.randint(1, 28):02d} 12:00:00 GMT\n"
           f"notAfter=2027-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d} 12:00:00 GMT\nVerify return code: 0 (ok)")
    return (f"Checking the TLS certificate of {svc}.", "run_shell",
            {"cmd": f"openssl s_client -connect {svc}.internal:443 </dev/null | openssl x509 -noout -subject -issuer -serial -ext subjectAltName -dates"}, out, False)


def t_queue(rng, ctx):
    body = {"queues": [{"name": q, "depth": rng.randint(0, 40), "consumers": rng.randint(1, 6)}
                       for q in rng.sample(["emails", "thumbnails", "webhooks-out", "audit", "search-index"], 3)]}
    return ("Checking queue depths on the broker.", "http_get", {"url": f"http://{ctx['host']}/broker/api/queues"}, body, False)


def t_ci_other(rng, ctx):
    jobs = [{"name": j, "status": "passed", "duration_s": rng.randint(20, 300)}
            for j in rng.sample(["lint", "unit", "build-image", "helm-template", "docs-build", "license-scan"], 4)]
    body = {"pipeline": rng.choice(["docs-site", "lint-only", "helm-charts"]), "status": "passed",
            "ref": "main", "duration_s": sum(j["duration_s"] for j in jobs), "jobs": jobs}
    return ("Checking an unrelated pipeline to see if CI itself is healthy.", "http_get",
            {"url": f"http://ci.local/api/pipelines/latest?repo={ctx['repo']}-tools"}, body, False)


def t_timeout(rng, ctx):
    svc = _svc(rng, ctx)
    text = rng.choice([
        f"ConnectTimeout: HTTPConnectionPool(host='{svc}-admin', port=8081): Max retries exceeded with url: /stats "
        f"(Caused by ConnectTimeoutError(<urllib3.connection.HTTPConnection object>, 'Connection to {svc}-admin timed out. (connect timeout=10)'))",
        f"HTTP 503 Service Unavailable\n{{\"error\": \"upstream {svc}-admin is being redeployed\", \"retry_after_s\": {rng.randint(30, 120)}, "
        f"\"request_id\": \"req-{rng.randint(100000, 999999)}\"}}",
        "HTTP 429 Too Many Requests\n{\"error\": \"rate limit exceeded\", \"limit\": \"60 requests/minute\", "
        f"\"token\": \"ro-investigator\", \"reset_in_s\": {rng.randint(5, 59)}}}",
    ])
    return (f"Trying the {svc} admin endpoint for extra stats.", "http_get",
            {"url": f"http://{svc}-admin:8081/stats"}, text, True)


def t_sql_other(rng, ctx):
    table = rng.choice(["newsletter_subscriptions", "user_preferences", "audit_exports", "api_keys"])
    rows = [[st, rng.randint(100, 80_000)] for st in ["active", "disabled", "pending"]]
    body = {"columns": ["status", "count"], "rows": rows, "row_count": 3, "elapsed_ms": rng.randint(3, 90)}
    return (f"Sanity-checking row counts in {table}.", "sql_query",
            {"db": ctx["db"], "query": f"SELECT status, count(*) FROM {table} GROUP BY status ORDER BY status"}, body, False)


def t_cron(rng, ctx):
    out = "\n".join([
        "# m h dom mon dow  command",
        f"{rng.randint(0, 59)} {rng.randint(0, 5)} * * *  /usr/local/bin/rotate-logs --keep 14",
        f"*/{rng.choice([5, 10, 15])} * * * *  /usr/local/bin/push-metrics --target pushgw:9091",
        f"{rng.randint(0, 59)} {rng.randint(6, 9)} * * 1  /usr/local/bin/weekly-report --mail ops@",
        f"{rng.randint(0, 59)} {rng.randint(10, 23)} * * *  /usr/local/bin/prune-tmp /tmp 3d",
    ])
    return ("Listing cron jobs on the host.", "run_shell", {"cmd": f"ssh {ctx['host']} crontab -l"}, out, False)


def t_tickets(rng, ctx):
    svc = _svc(rng, ctx)
    summaries = ["Upgrade base image", "Rotate dashboard API key", "Tidy alert labels", "Add runbook link to alerts", "Bump chart version"]
    items = [{"key": f"OPS-{rng.randint(1000, 1999)}", "summary": sm, "priority": "low", "updated": f"{rng.randint(3, 40)}d"}
             for sm in rng.sample(summaries, 2)]
    body = {"query": f"component:{svc} status:open", "total": len(items), "items": items}
    return (f"Checking open tickets on {svc}.", "http_get", {"url": f"http://tickets.local/api/search?q=component:{svc}+status:open"}, body, False)


def t_mem(rng, ctx):
    total = rng.choice([15_884, 31_906, 64_214])
    used = total * rng.randint(25, 60) // 100
    out = ("               total        used        free      shared  buff/cache   available\n"
           f"Mem:           {total}        {used}        {total - used - 900}         112         900       {total - used}\n"
           f"Swap:              0           0           0")
    return ("Checking memory on the host.", "run_shell", {"cmd": f"ssh {ctx['host']} free -m"}, out, False)


def t_listdir(rng, ctx):
    svc = _svc(rng, ctx)
    files = [f"{svc}.log", f"{svc}.log.1.gz", f"{svc}.log.2.gz", "access.log"]
    body = {"path": f"/var/log/{svc}", "entries": [{"name": f, "size": rng.randint(10_000, 9_000_000)} for f in files]}
    return (f"Listing the {svc} log directory.", "list_dir", {"path": f"/var/log/{svc}"}, body, False)


def t_404(rng, ctx):
    svc = _svc(rng, ctx)
    text = (f"HTTP 404 Not Found\n{{\"error\": \"no route for GET /{svc}/debug/vars\", \"hint\": \"debug endpoints are disabled in production builds\", "
            f"\"request_id\": \"req-{rng.randint(100000, 999999)}\"}}")
    return (f"Trying the {svc} debug endpoint.", "http_get", {"url": f"http://{ctx['host']}/{svc}/debug/vars"}, text, True)



TEMPLATES = [t_health, t_pods, t_disk, t_grep_none, t_config, t_cpu, t_gitlog, t_dns, t_flags,
             t_cert, t_queue, t_ci_other, t_timeout, t_sql_other, t_cron, t_tickets, t_mem, t_listdir, t_404]
