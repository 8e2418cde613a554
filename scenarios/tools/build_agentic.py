#!/usr/bin/env python3
"""Writes the live agentic worlds of scenarios/agentic/ (deterministic: no randomness).

Each world: a question ({base} is replaced by http://127.0.0.1:PORT by the harness),
JSON endpoints with the facts spread over many calls and realistic filler records,
and probes on the final answer: required keywords, `wrong` values the world
gives for other things (an answer holding one contradicts a tool result), and
`wrong_answers`: whole answers phrased like the reference but stating a value a
forgetful reader would confuse (a trap value, the other rotation's on-call, the
superseded figure), for the likelihood scorer's choice test.
Run: python3 scenarios/tools/build_agentic.py
"""
import json
import os

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "agentic")


def disks(page, hosts):
    rows = []
    for h, used, model in hosts:
        rows.append({"host": h, "device": "nvme0n1", "mount": "/var/cache/images", "used_pct": used,
                     "model": model, "firmware": "EDA7902Q", "smart": "PASSED", "inodes_used_pct": (used * 3) % 71 + 9})
    return {"page": page, "pages": 3, "collected_at": "2026-11-30T06:00:00Z", "disks": rows}


def runbook_disk():
    p1 = [("web-01", 44, "Samsung PM9A3 1.92TB"), ("web-02", 51, "Samsung PM9A3 1.92TB"), ("web-03", 38, "Micron 7450 1.92TB"),
          ("web-04", 62, "Samsung PM9A3 1.92TB"), ("web-05", 47, "Micron 7450 1.92TB")]
    p2 = [("web-06", 55, "Samsung PM9A3 1.92TB"), ("web-07", 97, "Micron 7450 1.92TB"), ("web-08", 49, "Samsung PM9A3 1.92TB"),
          ("web-09", 58, "Micron 7450 1.92TB"), ("web-10", 40, "Samsung PM9A3 1.92TB")]
    p3 = [("web-11", 66, "Samsung PM9A3 1.92TB"), ("web-12", 43, "Micron 7450 1.92TB"), ("web-13", 71, "Samsung PM9A3 1.92TB"),
          ("web-14", 52, "Micron 7450 1.92TB"), ("web-15", 39, "Samsung PM9A3 1.92TB")]
    endpoints = [
        {"path": "/disks/page1.json", "body": disks(1, p1)},
        {"path": "/disks/page2.json", "body": disks(2, p2)},
        {"path": "/disks/page3.json", "body": disks(3, p3)},
        {"path": "/hosts/web-07.json", "body": {"host": "web-07", "role": "image cache", "rack": "B7", "kernel": "6.8.0-45",
                                                 "owner_team": "media-storage", "cost_center": "CC-4410", "uptime_days": 212,
                                                 "notes": "Cache eviction cron was disabled during the November migration."}},
        {"path": "/hosts/web-13.json", "body": {"host": "web-13", "role": "thumbnailer", "rack": "C2", "kernel": "6.8.0-45",
                                                 "owner_team": "media-render", "cost_center": "CC-4412", "uptime_days": 90, "notes": ""}},
        {"path": "/teams/media-storage.json", "body": {"team": "media-storage", "lead": "Priya Raman", "oncall": "Tomas Berg",
                                                        "channel": "#media-storage", "escalation": "page via PagerDuty service P7X2"}},
        {"path": "/teams/media-render.json", "body": {"team": "media-render", "lead": "Ines Duarte", "oncall": "Kwame Mensah",
                                                       "channel": "#media-render", "escalation": "page via PagerDuty service Q4B9"}},
        {"path": "/cron/web-07.json", "body": {"host": "web-07", "jobs": [
            {"name": "cache-evict", "schedule": "*/30 * * * *", "enabled": False, "disabled_by": "migration-2026-11", "disabled_at": "2026-11-12T22:40:00Z"},
            {"name": "logrotate", "schedule": "0 3 * * *", "enabled": True},
            {"name": "metrics-push", "schedule": "* * * * *", "enabled": True}]}},
    ]
    q = ("First call the http tool with url {base}/disks/page1.json, then call the http tool with url "
         "{base}/disks/page2.json, then call the http tool with url {base}/disks/page3.json, then call the http tool with url "
         "{base}/hosts/web-07.json, then call the http tool with url {base}/teams/media-storage.json, then call the http "
         "tool with url {base}/cron/web-07.json, then say how full the fullest disk is, who is on call for its team and why "
         "its cache was not evicted.")
    probes = [
        {"id": "host", "fact": "the fullest host and its usage", "source": "/disks/page2.json",
         "required": [["web-07", "web 07"], ["97%", "97 %", "97 percent", "97"]], "wrong": [["web-13"]], "reference": "web-07, at 97 %.",
         "wrong_answers": ["web-13, at 71 %.", "web-11, at 66 %.", "web-04, at 62 %."]},
        {"id": "team", "fact": "the owning team", "source": "/hosts/web-07.json",
         "required": [["media-storage", "media storage"]], "wrong": [["media-render", "media render"]], "reference": "The media-storage team owns it.",
         "wrong_answers": ["The media-render team owns it.", "The thumbnailer team owns it."]},
        {"id": "oncall", "fact": "who is on call", "source": "/teams/media-storage.json",
         "required": [["Tomas Berg", "Tomas"]], "partial": [["Priya Raman"]], "wrong": [["Kwame Mensah", "Kwame"]], "reference": "Tomas Berg is on call.",
         "wrong_answers": ["Kwame Mensah is on call.", "Priya Raman is on call.", "Ines Duarte is on call."]},
        {"id": "cause", "fact": "why the cache was not evicted", "source": "/cron/web-07.json",
         "required": [["cache-evict", "eviction", "evict"], ["disabled", "not enabled"]], "partial": [["migration"]],
         "reference": "The cache-evict cron job was disabled during the November migration.",
         "wrong_answers": ["The logrotate cron job was disabled during the November migration.", "The metrics-push cron job was disabled during the November migration.", "The cache-evict cron job ran every 30 minutes, but the disk filled faster."]},
    ]
    route = ["/disks/page1.json", "/disks/page2.json", "/disks/page3.json", "/hosts/web-07.json", "/teams/media-storage.json", "/cron/web-07.json"]
    return {"id": "runbook-disk", "title": "Runbook: a nearly full image-cache disk, its owner, on-call and cause",
            "question": q, "route": route, "endpoints": endpoints, "probes": probes}


def checkout_incident():
    deploys1 = [{"id": f"D-{i}", "service": s, "build": b, "at": t, "by": who, "status": "succeeded"} for i, s, b, t, who in [
        (9101, "search", 2204, "2026-11-28T09:12:00Z", "ci-bot"), (9102, "cart", 3310, "2026-11-28T10:40:00Z", "ci-bot"),
        (9103, "profile", 1187, "2026-11-28T11:05:00Z", "ci-bot"), (9104, "search", 2205, "2026-11-28T12:30:00Z", "ci-bot"),
        (9105, "ads", 771, "2026-11-28T13:15:00Z", "ci-bot")]]
    deploys2 = [{"id": f"D-{i}", "service": s, "build": b, "at": t, "by": who, "status": st} for i, s, b, t, who, st in [
        (9106, "checkout", 4817, "2026-11-28T14:02:00Z", "ci-bot", "succeeded"), (9107, "cart", 3311, "2026-11-28T14:20:00Z", "ci-bot", "succeeded"),
        (9108, "checkout", 4816, "2026-11-28T14:41:00Z", "Lena Okafor", "rollback"), (9109, "ads", 772, "2026-11-28T15:00:00Z", "ci-bot", "succeeded")]]
    endpoints = [
        {"path": "/deploys/page1.json", "body": {"page": 1, "pages": 2, "deploys": deploys1}},
        {"path": "/deploys/page2.json", "body": {"page": 2, "pages": 2, "deploys": deploys2}},
        {"path": "/metrics/checkout.json", "body": {"service": "checkout", "window": "2026-11-28T13:30Z/15:30Z", "series": [
            {"t": "13:45", "error_rate_pct": 0.2, "p99_ms": 310}, {"t": "14:00", "error_rate_pct": 0.2, "p99_ms": 305},
            {"t": "14:05", "error_rate_pct": 6.4, "p99_ms": 2140}, {"t": "14:20", "error_rate_pct": 6.1, "p99_ms": 2290},
            {"t": "14:45", "error_rate_pct": 0.3, "p99_ms": 330}, {"t": "15:00", "error_rate_pct": 0.2, "p99_ms": 312}]}},
        {"path": "/metrics/cart.json", "body": {"service": "cart", "window": "2026-11-28T13:30Z/15:30Z", "series": [
            {"t": "14:00", "error_rate_pct": 0.1, "p99_ms": 180}, {"t": "14:20", "error_rate_pct": 0.4, "p99_ms": 240},
            {"t": "14:45", "error_rate_pct": 0.1, "p99_ms": 175}]}},
        {"path": "/incidents/INC-5521.json", "body": {"id": "INC-5521", "title": "Checkout payments failing", "opened": "2026-11-28T14:07:00Z",
                                                      "resolved": "2026-11-28T14:46:00Z", "severity": "SEV-2", "failed_orders": 6404,
                                                      "commander": "Lena Okafor", "status": "resolved"}},
        {"path": "/builds/4817.json", "body": {"build": 4817, "service": "checkout", "commit": "a41f9c2",
                                               "change": "Payment client upgraded to v5; connection pool max lowered from 64 to 8",
                                               "author": "Marek Novak", "reviewed_by": "Sara Lindqvist"}},
        {"path": "/builds/3311.json", "body": {"build": 3311, "service": "cart", "commit": "77be01d", "change": "Copy update on the cart banner",
                                               "author": "Joon Park", "reviewed_by": "Ana Silva"}},
    ]
    q = ("First call the http tool with url {base}/deploys/page1.json, then call the http tool with url "
         "{base}/deploys/page2.json, then call the http tool with url {base}/metrics/checkout.json, then call the http tool "
         "with url {base}/incidents/INC-5521.json, then call the http tool with url {base}/builds/4817.json, then say which "
         "build broke checkout, the peak error rate, how many orders failed, what change caused it and who rolled it back.")
    probes = [
        {"id": "build", "fact": "the build that broke checkout", "source": "/deploys/page2.json",
         "required": [["4817"]], "wrong": [["4816"], ["3311"]], "reference": "Build 4817 of checkout.",
         "wrong_answers": ["Build 4816 of checkout.", "Build 3311 of cart.", "Build 2205 of search."]},
        {"id": "peak", "fact": "the peak error rate", "source": "/metrics/checkout.json",
         "required": [["6.4%", "6.4 %", "6.4 percent", "6.4"]], "wrong": [["6.1%", "6.1"]], "reference": "The error rate peaked at 6.4 %.",
         "wrong_answers": ["The error rate peaked at 6.1 %.", "The error rate peaked at 0.4 %."]},
        {"id": "orders", "fact": "failed orders", "source": "/incidents/INC-5521.json",
         "required": [["6404", "6,404"]], "reference": "6,404 orders failed.",
         "wrong_answers": ["4,817 orders failed.", "2,290 orders failed."]},
        {"id": "cause", "fact": "the change", "source": "/builds/4817.json",
         "required": [["connection pool", "pool"], ["8"]], "partial": [["64"], ["payment client", "v5"]],
         "reference": "The payment client's connection pool max was lowered from 64 to 8.",
         "wrong_answers": ["The cart banner's copy text was updated in build 3311.", "The payment client was upgraded to v5; nothing else changed."]},
        {"id": "rollback", "fact": "who rolled back", "source": "/deploys/page2.json",
         "required": [["Lena Okafor", "Okafor"]], "wrong": [["Marek Novak"], ["Sara Lindqvist"]], "reference": "Lena Okafor rolled it back (to 4816).",
         "wrong_answers": ["Marek Novak rolled it back (to 4816).", "Sara Lindqvist rolled it back (to 4816).", "ci-bot rolled it back (to 4816)."]},
    ]
    route = ["/deploys/page1.json", "/deploys/page2.json", "/metrics/checkout.json", "/incidents/INC-5521.json", "/builds/4817.json"]
    return {"id": "checkout-incident", "title": "Incident: which deploy broke checkout, how badly, why, and who rolled it back",
            "question": q, "route": route, "endpoints": endpoints, "probes": probes}


def index_crawl():
    def page(n, jobs):
        return {"page": n, "pages": 6, "next": f"/jobs/page{n + 1}.json" if n < 6 else None, "jobs": jobs}
    def job(name, rows, status, minutes, owner):
        return {"job": name, "rows_written": rows, "status": status, "duration_min": minutes, "owner": owner}
    pages = {
        1: [job("orders_daily", 1_204_331, "ok", 14, "data-eng"), job("refunds_daily", 20_114, "ok", 3, "data-eng"), job("sessions_hourly", 845_002, "ok", 6, "growth")],
        2: [job("ledger_close", 0, "failed", 41, "finance-data"), job("fx_rates", 168, "ok", 1, "finance-data"), job("ads_spend", 9_912, "ok", 2, "growth")],
        3: [job("inventory_snap", 3_310_874, "ok", 22, "supply"), job("returns_weekly", 4_410, "ok", 2, "supply"), job("email_events", 2_004_118, "ok", 9, "crm")],
        4: [job("ledger_close_retry", 0, "failed", 38, "finance-data"), job("churn_model", 55_120, "ok", 31, "ml-platform"), job("search_terms", 770_221, "ok", 4, "search")],
        5: [job("warehouse_vacuum", 0, "skipped", 0, "platform"), job("payouts_daily", 18_775, "ok", 5, "finance-data"), job("crm_sync", 120_044, "ok", 7, "crm")],
        6: [job("ledger_close_manual", 0, "failed", 44, "finance-data"), job("tax_export", 3_118, "ok", 2, "finance-data"), job("audit_trail", 440_912, "ok", 11, "security")],
    }
    endpoints = [{"path": "/index.json", "body": {"title": "Nightly pipeline run 2026-11-29", "first_page": "/jobs/page1.json", "pages": 6,
                                                   "errors": "/errors/ledger_close.json"}}]
    endpoints += [{"path": f"/jobs/page{n}.json", "body": page(n, j)} for n, j in pages.items()]
    endpoints.append({"path": "/errors/ledger_close.json", "body": {"job": "ledger_close", "error": "deadlock detected on table gl_entries",
                                                                    "first_seen": "2026-11-29T01:12:00Z", "attempts": 3,
                                                                    "summary": "3 attempts (scheduled, retry, manual), all failed",
                                                                    "blocking_query_from": "payouts_daily"}})
    q = ("First call the http tool with url {base}/index.json, then call the http tool on every jobs page it leads to "
         "(each page names the next one) and on the errors page it lists, then say which job failed, how many times it was "
         "attempted, which team owns it, what the error was and which job held the blocking query.")
    probes = [
        {"id": "job", "fact": "the failing job", "source": "/jobs/page2.json", "required": [["ledger_close", "ledger close"]],
         "wrong": [["warehouse_vacuum"]], "reference": "ledger_close failed.",
         "wrong_answers": ["warehouse_vacuum failed.", "payouts_daily failed."]},
        {"id": "attempts", "fact": "attempts", "source": "/errors/ledger_close.json", "required": [["3 attempts", "three attempts", "3 times", "three times", "attempted 3", "attempted three", "3 tries"]],
         "partial": [["retry"], ["manual"]], "reference": "It was attempted 3 times (ledger_close, ledger_close_retry, ledger_close_manual).",
         "wrong_answers": ["It was attempted once (ledger_close only, with no retry or manual run).", "It was attempted 2 times (ledger_close and ledger_close_retry)."]},
        {"id": "owner", "fact": "owning team", "source": "/jobs/page2.json", "required": [["finance-data", "finance data"]],
         "wrong": [["data-eng"], ["platform"]], "reference": "The finance-data team.",
         "wrong_answers": ["The data-eng team.", "The platform team.", "The crm team."]},
        {"id": "error", "fact": "the error", "source": "/errors/ledger_close.json", "required": [["deadlock"]], "partial": [["gl_entries"]],
         "reference": "A deadlock on table gl_entries.",
         "wrong_answers": ["A lock timeout on table gl_entries.", "A missing table gl_entries."]},
        {"id": "blocker", "fact": "the blocking job", "source": "/errors/ledger_close.json", "required": [["payouts_daily", "payouts daily"]],
         "wrong": [["crm_sync"], ["orders_daily"]], "reference": "payouts_daily held the blocking query.",
         "wrong_answers": ["crm_sync held the blocking query.", "orders_daily held the blocking query.", "tax_export held the blocking query."]},
    ]
    route = ["/index.json"] + [f"/jobs/page{n}.json" for n in pages] + ["/errors/ledger_close.json"]
    return {"id": "pipeline-crawl", "title": "Crawl: follow a paginated job index to a failing pipeline job and its cause",
            "question": q, "route": route, "endpoints": endpoints, "probes": probes}


# ---------------------------------------------------------------------------
# Long worlds: 12+ calls on a route, every answer fact on a different endpoint,
# bodies of ~1,000 characters so that the default window (C = 2048, G = 192)
# fills in 3-4 rounds. Each has one contradiction (a later, authoritative
# endpoint corrects an earlier one), one date-ordered chain (the earliest event
# is on a later page than the ones a reader sees first) and wrong-value traps.

FILLER_SOURCES = ["edge-agent", "collector", "scheduler", "watchdog", "syncer", "auditor", "relay", "indexer"]
FILLER_MSGS = ["health check passed", "config reloaded without changes", "heartbeat acknowledged", "cache warmed",
               "lease renewed", "queue drained", "metrics flushed", "token refreshed", "peer list unchanged",
               "snapshot skipped: nothing new", "retry budget intact", "connection pool steady"]
LETTERS = "bcdfghjkmnpqrstvwxz"
TARGET_CHARS = 1000


def compact(body):
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False)


def pad(body, seed, target=TARGET_CHARS):
    """Adds digit-free filler events until the compact body is about `target` characters."""
    events = []
    k = seed * 7 + 3
    while len(compact({**body, "events": events})) < target - 90:
        k = (k * 31 + 17) % 9973
        ident = "".join(LETTERS[(k // (i + 1) + i * 5) % len(LETTERS)] for i in range(6))
        events.append({"id": "evt-" + ident, "source": FILLER_SOURCES[k % len(FILLER_SOURCES)], "msg": FILLER_MSGS[(k // 7) % len(FILLER_MSGS)]})
    return {**body, "events": events} if events else body


def long_world(wid, title, task, route_bodies, traps, probes):
    """route_bodies: [(path, body)] in route order, each linking to the next; traps: [(path, body)] off the route."""
    endpoints = []
    for i, (path, body) in enumerate(route_bodies):
        nxt = route_bodies[i + 1][0] if i + 1 < len(route_bodies) else None
        b = dict(body)
        if nxt:
            b["next"] = nxt
        endpoints.append({"path": path, "body": pad(b, i + len(wid))})
    for j, (path, body) in enumerate(traps):
        endpoints.append({"path": path, "body": pad(body, 50 + j + len(wid))})
    route = [p for p, _ in route_bodies]
    urls = ", ".join("{base}" + p for p in route)
    q = (f"Call the http tool on each of these {len(route)} URLs in this order, one call per reply: {urls}. "
         f"Then answer: {task}")
    return {"id": wid, "title": title, "question": q, "route": route, "endpoints": endpoints, "probes": probes}


def P(pid, fact, source, required, reference, wrong=(), partial=(), kind="fact", wrong_answers=()):
    p = {"id": pid, "fact": fact, "source": source, "required": list(required), "reference": reference}
    if partial:
        p["partial"] = list(partial)
    if wrong:
        p["wrong"] = list(wrong)
    if wrong_answers:
        p["wrong_answers"] = list(wrong_answers)
    if kind != "fact":
        p["kind"] = kind
    return p


def cdn_purge_storm():
    def region(name, pct, pops):
        return {"region": name, "edge_5xx_pct": pct, "pops": pops, "shield": name + "-shield"}
    route = [
        ("/incident/INC-7702.json", {"id": "INC-7702", "title": "Edge 5xx storm after cache purges", "severity": "SEV-1",
                                     "opened": "2026-12-01T02:14:00Z", "commander": "Yusuf Adeyemi",
                                     "previous_incident": {"id": "INC-7690", "commander": "Hana Kobayashi", "status": "closed"}}),
        ("/status/public.json", {"page": "status.kestrel.test", "component": "Edge delivery", "state": "resolved",
                                 "impact_started": "2026-12-01T02:20:00Z", "subscribers_notified": 8841,
                                 "text": "Some customers saw errors loading images and scripts."}),
        ("/services/edge-gateway.json", {"service": "edge-gateway", "tier": "tier-0", "owner_team": "edge-platform", "oncall_rotation": "rota-edge-a",
                                         "depends_on": [{"service": "purge-api", "owner_team": "edge-tools"}], "runbook": "RB-EDGE-12"}),
        ("/regions/page1.json", {"page": 1, "pages": 3, "edge_failed_requests_total": 1284300,
                                 "regions": [region("eu-west-3", 2.1, 14), region("us-east-2", 3.4, 22), region("eu-north-1", 1.7, 9)]}),
        ("/regions/page2.json", {"page": 2, "pages": 3,
                                 "regions": [region("ap-south-2", 18.7, 11), region("us-west-1", 6.2, 17), region("ca-central-1", 2.9, 6)]}),
        ("/regions/page3.json", {"page": 3, "pages": 3,
                                 "regions": [region("sa-east-1", 11.9, 8), region("af-south-1", 4.4, 4), region("me-central-1", 3.8, 5)]}),
        ("/purges/page1.json", {"page": 1, "pages": 2, "order": "newest first", "purges_in_storm": 3914, "token": "purge-bot-7",
                                "purges": [{"at": "02:31:50", "pattern": "/img/*"}, {"at": "02:24:18", "pattern": "/js/*"},
                                           {"at": "02:17:44", "pattern": "/*"}, {"at": "02:12:07", "pattern": "/css/*"}]}),
        ("/purges/page2.json", {"page": 2, "pages": 2, "order": "newest first", "token": "purge-bot-7",
                                "purges": [{"at": "02:10:31", "pattern": "/img/*"}, {"at": "02:10:05", "pattern": "/*"},
                                           {"at": "02:09:40", "pattern": "/fonts/*"}, {"at": "02:09:12", "pattern": "/*", "note": "first purge of the storm"}]}),
        ("/tokens/purge-bot-7.json", {"token": "purge-bot-7", "scope": "purge:*", "created": "2026-11-30T23:40:00Z",
                                      "created_by": "Dana Whitfield", "team": "growth-experiments", "last_rotated_by": "Leon Marsh"}),
        ("/changes/CHG-3318.json", {"change": "CHG-3318", "summary": "Purge API rate limit per token raised from 50 to 5000 per minute",
                                    "deployed": "2026-11-30T22:05:00Z", "author": "Priyanka Das", "approved_by": "Leon Marsh"}),
        ("/origin/load.json", {"origin": "img-origin", "shield_hit_ratio_before_pct": 94, "shield_hit_ratio_during_pct": 11,
                               "peak_origin_rps": 48200, "second_peak_origin_rps": 31900, "autoscaled_to_nodes": 64}),
        ("/billing/egress.json", {"account": "edge-prod", "day": "2026-12-01", "extra_origin_egress_usd": 41380,
                                  "typical_day_egress_usd": 12950, "currency": "USD"}),
        ("/postmortem/draft.json", {"incident": "INC-7702", "status": "draft, reviewed",
                                    "customer_impact_began": "2026-12-01T02:11:00Z",
                                    "correction": "The status page gives the time the notice was posted, not when impact began.",
                                    "root_cause": "An experiment token with purge:* scope purged whole paths in a loop after the rate limit was raised."}),
        ("/oncall/rota-edge-a.json", {"rotation": "rota-edge-a", "primary": "Ruth Okonkwo", "secondary": "Marco Bellini",
                                        "handover": "Mondays 09:00 UTC"}),
    ]
    traps = [
        ("/oncall/rota-edge-b.json", {"rotation": "rota-edge-b", "primary": "Sven Aalto", "secondary": "Ama Boateng"}),
        ("/tokens/deploy-hook.json", {"token": "deploy-hook", "scope": "purge:/releases/*", "created_by": "Elif Demir", "team": "release-eng"}),
    ]
    probes = [
        P("commander", "the incident commander", "/incident/INC-7702.json", [["Yusuf Adeyemi", "Adeyemi"]], "Yusuf Adeyemi commands INC-7702.", wrong=[["Hana Kobayashi", "Kobayashi"]],
          wrong_answers=["Hana Kobayashi commands INC-7702.", "Ruth Okonkwo commands INC-7702."]),
        P("notified", "status page subscribers notified", "/status/public.json", [["8841", "8,841"]], "8,841 subscribers were notified.",
          wrong_answers=["3,914 subscribers were notified.", "12,950 subscribers were notified."]),
        P("team", "the team owning the edge gateway", "/services/edge-gateway.json", [["edge-platform", "edge platform"]], "The edge-platform team owns it.", wrong=[["edge-tools", "edge tools"]],
          wrong_answers=["The edge-tools team owns it.", "The growth-experiments team owns it.", "The release-eng team owns it."]),
        P("failed", "failed edge requests in all regions", "/regions/page1.json", [["1284300", "1,284,300", "1.28 million", "1.3 million"]], "1,284,300 requests failed at the edge.",
          wrong_answers=["3,914 requests failed at the edge.", "48,200 requests failed at the edge."]),
        P("region", "the worst region and its 5xx rate", "/regions/page2.json", [["ap-south-2", "ap south 2"], ["18.7"]], "ap-south-2, at 18.7 % 5xx.", wrong=[["sa-east-1", "sa east 1"], ["11.9"]],
          wrong_answers=["sa-east-1, at 11.9 % 5xx.", "us-west-1, at 6.2 % 5xx.", "us-east-2, at 3.4 % 5xx."]),
        P("storm", "purges in the storm", "/purges/page1.json", [["3914", "3,914"]], "3,914 purges were sent in the storm.",
          wrong_answers=["8,841 purges were sent in the storm.", "5,000 purges were sent in the storm."]),
        P("first", "when the first purge of the storm was sent", "/purges/page2.json", [["02:09"]], "The first purge of the storm was at 02:09:12.", wrong=[["02:12"]], kind="order",
          wrong_answers=["The first purge of the storm was at 02:12:07.", "The first purge of the storm was at 02:31:50.", "The first purge of the storm was at 02:10:05."]),
        P("creator", "who created the purging token", "/tokens/purge-bot-7.json", [["Dana Whitfield", "Whitfield"]], "Dana Whitfield created purge-bot-7.", wrong=[["Elif Demir"], ["Leon Marsh"]],
          wrong_answers=["Leon Marsh created purge-bot-7.", "Elif Demir created purge-bot-7.", "Priyanka Das created purge-bot-7."]),
        P("limit", "the new purge rate limit", "/changes/CHG-3318.json", [["5000", "5,000"]], "CHG-3318 raised the limit from 50 to 5,000 per minute.", partial=[["CHG-3318"]],
          wrong_answers=["CHG-3318 raised the limit from 50 to 500 per minute.", "CHG-3318 raised the limit from 5 to 50 per minute."]),
        P("origin", "peak origin requests per second", "/origin/load.json", [["48200", "48,200", "48.2k"]], "The origin peaked at 48,200 requests per second.", wrong=[["31900", "31,900"]],
          wrong_answers=["The origin peaked at 31,900 requests per second.", "The origin peaked at 41,380 requests per second."]),
        P("cost", "extra origin egress cost", "/billing/egress.json", [["41380", "41,380"]], "The extra egress cost was $41,380.", wrong=[["12950", "12,950"]],
          wrong_answers=["The extra egress cost was $12,950.", "The extra egress cost was $48,200."]),
        P("impact", "when customer impact began", "/postmortem/draft.json", [["02:11"]], "Customer impact began at 02:11; the status page gives the time its notice was posted.", wrong=[["02:20"]], kind="contradiction",
          wrong_answers=["Customer impact began at 02:20; the status page gives the time impact began.", "Customer impact began at 02:14; the incident record gives the time it was opened."]),
        P("oncall", "who is on call for the owning team", "/oncall/rota-edge-a.json", [["Ruth Okonkwo", "Okonkwo"]], "Ruth Okonkwo is on call for edge-platform.", wrong=[["Marco Bellini", "Bellini"], ["Sven Aalto", "Aalto"]],
          wrong_answers=["Marco Bellini is on call for edge-platform.", "Sven Aalto is on call for edge-platform."]),
    ]
    task = ("who commands the incident, how many status subscribers were notified, which team owns the edge gateway, how many "
            "edge requests failed, which region was worst and its 5xx rate, how many purges the storm sent, when its first purge "
            "was sent, who created the purging token, the new purge rate limit, the peak origin requests per second, the extra "
            "egress cost, when customer impact began, and who is on call for the owning team.")
    return long_world("cdn-purge-storm", "Long route: a cache-purge storm at the edge, from incident to on-call (14 calls)", task, route, traps, probes)


def replica_lag_refunds():
    def rep(name, lag, az):
        return {"replica": name, "lag_ms": lag, "az": az, "state": "streaming" if lag < 60000 else "replay paused"}
    route = [
        ("/tickets/SUP-4410.json", {"ticket": "SUP-4410", "subject": "Customers refunded twice", "escalated_by": "Alma Ferreira",
                                    "previous_assignee": "Noor Haddad", "opened": "2026-12-02T06:12:00Z"}),
        ("/services/refunds-api.json", {"service": "refunds-api", "owner_team": "payments-core", "oncall_rotation": "rota-pay-a", "reads_from": "orders-ro-lb",
                                        "sibling": {"service": "refunds-ui", "owner_team": "payments-edge"}}),
        ("/clusters/orders-db.json", {"cluster": "orders-db", "primary": "orders-db-p1", "max_allowed_lag_ms": 1500,
                                      "analytics_cluster": {"name": "orders-olap", "max_allowed_lag_ms": 2500}}),
        ("/replicas/page1.json", {"page": 1, "pages": 2, "lb_pool": "orders-ro-lb", "health_check": "lag-aware: disabled",
                                  "replicas": [rep("orders-db-r1", 120, "az-a"), rep("orders-db-r2", 180, "az-b")]}),
        ("/replicas/page2.json", {"page": 2, "pages": 2,
                                  "replicas": [rep("orders-db-r3", 287400, "az-c"), rep("orders-db-r4", 41200, "az-a")]}),
        ("/hosts/orders-db-r3.json", {"host": "orders-db-r3", "rack": "D4", "wal_volume": "/var/lib/pg_wal",
                                      "alarms": [{"at": "2026-12-02T03:40:00Z", "what": "WAL volume 100% full"}]}),
        ("/wal/archive.json", {"cluster": "orders-db", "segments_missing": 1913,
                               "timeline": [{"at": "2026-12-02T03:52:00Z", "what": "archive_command failing"},
                                            {"at": "2026-12-02T04:05:00Z", "what": "replay paused on orders-db-r3"}]}),
        ("/deploys/refunds-api.json", {"service": "refunds-api", "deploys": [
            {"build": 9020, "at": "2026-12-01T16:00:00Z", "change": "log format"},
            {"build": 9021, "at": "2026-12-02T04:30:00Z", "change": "refund lookups read from replicas", "author": "Ivo Petrov"}]}),
        ("/flags/refunds.json", {"flag": "refunds.replica_reads", "rollout_pct": 100, "changed_at": "2026-12-02T04:31:00Z",
                                 "changed_by": "Mei Tanaka"}),
        ("/ledger/reconcile.json", {"run": "recon-1202", "duplicated_refunds_eur": 84213.50, "currency": "EUR",
                                    "method": "matched refund ids against settled payouts"}),
        ("/status/public.json", {"component": "Refunds", "state": "monitoring", "affected_orders": 96,
                                 "updated": "2026-12-02T07:00:00Z", "text": "Some refunds were issued twice."}),
        ("/postmortem/draft.json", {"incident": "SUP-4410", "affected_orders_confirmed": 318,
                                    "correction": "The status page figure was an early estimate before reconciliation.",
                                    "root_cause": "Refund lookups read a replica whose replay had paused, so issued refunds looked unissued."}),
        ("/oncall/rota-pay-a.json", {"rotation": "rota-pay-a", "primary": "Kofi Asante", "secondary": "Lotte Jansen"}),
    ]
    traps = [
        ("/oncall/rota-pay-b.json", {"rotation": "rota-pay-b", "primary": "Ravi Menon", "secondary": "Zofia Nowak"}),
        ("/hosts/orders-db-r4.json", {"host": "orders-db-r4", "rack": "D1", "alarms": [{"at": "2026-12-02T05:15:00Z", "what": "CPU saturation"}]}),
    ]
    probes = [
        P("escalated", "who escalated the ticket", "/tickets/SUP-4410.json", [["Alma Ferreira", "Ferreira"]], "Alma Ferreira escalated SUP-4410.", wrong=[["Noor Haddad", "Haddad"]],
          wrong_answers=["Noor Haddad escalated SUP-4410.", "Mei Tanaka escalated SUP-4410."]),
        P("team", "the team owning refunds-api", "/services/refunds-api.json", [["payments-core", "payments core"]], "payments-core owns refunds-api.", wrong=[["payments-edge", "payments edge"]],
          wrong_answers=["payments-edge owns refunds-api.", "orders-db owns refunds-api."]),
        P("allowed", "the allowed replica lag", "/clusters/orders-db.json", [["1500", "1,500", "1.5 s", "1.5s", "1.5 seconds"]], "At most 1,500 ms of lag is allowed.", wrong=[["2500", "2,500"]],
          wrong_answers=["At most 2,500 ms of lag is allowed.", "At most 120 ms of lag is allowed."]),
        P("check", "the load balancer's lag check", "/replicas/page1.json", [["disabled"]], "The pool's lag-aware health check was disabled.", partial=[["orders-ro-lb"]],
          wrong_answers=["The pool's lag-aware health check was enabled.", "The pool's lag-aware health check was set to 1,500 ms."]),
        P("replica", "the lagging replica and its lag", "/replicas/page2.json", [["orders-db-r3", "r3"], ["287400", "287,400", "287.4"]], "orders-db-r3 lagged 287,400 ms.", wrong=[["orders-db-r4", "r4"], ["41200", "41,200"]],
          wrong_answers=["orders-db-r4 lagged 41,200 ms.", "orders-db-r2 lagged 180 ms."]),
        P("first", "the first event of the chain", "/hosts/orders-db-r3.json", [["03:40"]], "It began at 03:40 when the WAL volume on r3 filled.", wrong=[["03:52"], ["04:05"]], kind="order",
          wrong_answers=["It began at 03:52 when the WAL archive_command started failing.", "It began at 04:05 when replay paused on r3.", "It began at 04:30 when build 9021 was deployed."]),
        P("segments", "WAL segments missing", "/wal/archive.json", [["1913", "1,913"]], "1,913 WAL segments were missing.",
          wrong_answers=["318 WAL segments were missing.", "96 WAL segments were missing."]),
        P("build", "the build that moved reads to replicas", "/deploys/refunds-api.json", [["9021"]], "Build 9021 moved refund lookups to replicas.", wrong=[["9020"]],
          wrong_answers=["Build 9020 moved refund lookups to replicas.", "Build 4410 moved refund lookups to replicas."]),
        P("flag", "who turned the flag on", "/flags/refunds.json", [["Mei Tanaka", "Tanaka"]], "Mei Tanaka set refunds.replica_reads to 100 %.", wrong=[["Ivo Petrov", "Petrov"]],
          wrong_answers=["Ivo Petrov set refunds.replica_reads to 100 %.", "Kofi Asante set refunds.replica_reads to 100 %."]),
        P("amount", "the amount refunded twice", "/ledger/reconcile.json", [["84213", "84,213", "84.2k"]], "EUR 84,213.50 was refunded twice.",
          wrong_answers=["EUR 41,200.00 was refunded twice.", "EUR 2,500.00 was refunded twice."]),
        P("orders", "affected orders", "/postmortem/draft.json", [["318"]], "318 orders were affected; the status page figure was an early estimate.", wrong=[["96"]], kind="contradiction",
          wrong_answers=["96 orders were affected; the postmortem figure was an early estimate.", "1,913 orders were affected; the status page figure was an early estimate."]),
        P("oncall", "who is on call for the owning team", "/oncall/rota-pay-a.json", [["Kofi Asante", "Asante"]], "Kofi Asante is on call.", wrong=[["Lotte Jansen", "Jansen"], ["Ravi Menon", "Menon"]],
          wrong_answers=["Lotte Jansen is on call.", "Ravi Menon is on call.", "Zofia Nowak is on call."]),
    ]
    task = ("who escalated the ticket, which team owns refunds-api, the allowed replica lag, the state of the pool's lag check, "
            "which replica lagged and by how much, when the chain of failures began, how many WAL segments were missing, which "
            "build moved reads to replicas, who turned the flag on, the amount refunded twice, how many orders were affected, and "
            "who is on call for the owning team.")
    return long_world("replica-lag-refunds", "Long route: double refunds from a paused replica, ticket to on-call (13 calls)", task, route, traps, probes)


def mobile_crash_release():
    def group(gid, what, events):
        return {"group": gid, "signature": what, "events": events}
    route = [
        ("/releases/index.json", {"app": "kestrel-android", "current": "7.4.0", "rollout": "20% of users", "as_of": "2026-12-03T08:00:00Z",
                                  "release_manager": "Greta Lindholm", "previous": {"version": "7.3.2", "release_manager": "Omar Shaikh"}}),
        ("/releases/7.4.0.json", {"version": "7.4.0", "build": 74012, "previous_build": 73205, "released": "2026-12-03T07:30:00Z"}),
        ("/crashes/summary.json", {"version": "7.4.0", "crash_free_sessions_pct": 91.2, "crash_free_before_pct": 99.6, "groups": 57}),
        ("/crashes/page1.json", {"page": 1, "pages": 2, "new_groups": "23 new crash groups in this release",
                                 "groups_top": [group("CR-2207", "NullPointerException in ImageLoader", 410), group("CR-2215", "OOM in FeedAdapter", 388)]}),
        ("/crashes/page2.json", {"page": 2, "pages": 2,
                                 "groups_top": [group("CR-2231", "SIGSEGV in libvideo decode_frame", 6920), group("CR-2219", "ANR in CheckoutActivity", 295)]}),
        ("/crashes/CR-2231.json", {"group": "CR-2231", "first_seen": "2026-12-03T09:12:00Z", "os": "Android 14", "os_share_pct": 97,
                                   "other_os": "Android 13", "devices": ["Pixel 8", "Galaxy S23", "Pixel 7a"]}),
        ("/commits/page1.json", {"page": 1, "pages": 2, "order": "newest first", "commits": [
            {"sha": "c9e1a07", "at": "2026-12-02T17:20:00Z", "msg": "libvideo: guard null surface (follow-up)"},
            {"sha": "e4f0b19", "at": "2026-12-02T11:02:00Z", "msg": "checkout: copy change"}]}),
        ("/commits/page2.json", {"page": 2, "pages": 2, "order": "newest first", "commits": [
            {"sha": "a2c8d44", "at": "2026-12-01T15:45:00Z", "msg": "feed: prefetch tuning"},
            {"sha": "b71d3e2", "at": "2026-12-01T09:30:00Z", "msg": "libvideo: upgrade to the new major version", "author": "Sina Rahimi"}]}),
        ("/libs/libvideo.json", {"library": "libvideo", "from": "2.8.4", "to": "3.0.0",
                                 "breaking": "hardware decoder mode now defaults to hw-async (was hw-sync)"}),
        ("/flags/video.json", {"flag": "video.hw_async", "rollout_pct": 100, "set_by": "Kai Bauer", "set_at": "2026-12-02T18:00:00Z"}),
        ("/support/tickets.json", {"since": "2026-12-03T07:30:00Z", "tickets_about_video_crash": 1377, "top_tag": "video-playback"}),
        ("/store/reviews.json", {"store": "play", "one_star_reviews_since_release": 2418, "rating_before": 4.6, "rating_now": 3.1}),
        ("/rollout/7.4.0.json", {"version": "7.4.0", "rollout": "50% of users", "state": "paused", "paused_at": "2026-12-03T11:40:00Z",
                                 "note": "The release index is cached and shows the planned first stage."}),
        ("/oncall/rota-droid.json", {"rotation": "rota-droid", "primary": "Tuomas Virtanen", "secondary": "Beatriz Costa"}),
    ]
    traps = [
        ("/crashes/CR-2207.json", {"group": "CR-2207", "first_seen": "2026-11-20T10:00:00Z", "os": "Android 13", "os_share_pct": 61}),
        ("/oncall/rota-ios.json", {"rotation": "rota-ios", "primary": "Hugo Laurent", "secondary": "Nadia Karim"}),
    ]
    probes = [
        P("manager", "the release manager", "/releases/index.json", [["Greta Lindholm", "Lindholm"]], "Greta Lindholm manages 7.4.0.", wrong=[["Omar Shaikh", "Shaikh"]],
          wrong_answers=["Omar Shaikh manages 7.4.0.", "Kai Bauer manages 7.4.0."]),
        P("build", "the release build", "/releases/7.4.0.json", [["74012", "74,012"]], "7.4.0 is build 74012.", wrong=[["73205", "73,205"]],
          wrong_answers=["7.4.0 is build 73205.", "7.4.0 is build 2231."]),
        P("crashfree", "crash-free sessions now", "/crashes/summary.json", [["91.2"]], "Crash-free sessions fell to 91.2 %.", wrong=[["99.6"]],
          wrong_answers=["Crash-free sessions fell to 99.6 %.", "Crash-free sessions fell to 97 %."]),
        P("newgroups", "crash groups new in the release", "/crashes/page1.json", [["23 new", "23 crash groups", "23 groups"]], "23 crash groups are new in 7.4.0.",
          wrong_answers=["57 crash groups are new in 7.4.0.", "4 crash groups are new in 7.4.0."]),
        P("top", "the top crash group", "/crashes/page2.json", [["CR-2231", "CR 2231"], ["6920", "6,920"]], "CR-2231 (SIGSEGV in libvideo), 6,920 events.", wrong=[["CR-2207", "CR 2207"]],
          wrong_answers=["CR-2207 (NullPointerException in ImageLoader), 410 events.", "CR-2215 (OOM in FeedAdapter), 388 events."]),
        P("os", "the OS the crash hits", "/crashes/CR-2231.json", [["Android 14"]], "97 % of CR-2231 is on Android 14.", wrong=[["Android 13"]],
          wrong_answers=["97 % of CR-2231 is on Android 13.", "61 % of CR-2231 is on Android 13."]),
        P("commit", "the first commit of the chain", "/commits/page2.json", [["b71d3e2"]], "b71d3e2 (Dec 1) upgraded libvideo; the other libvideo commit was a later follow-up.", wrong=[["c9e1a07"]], kind="order",
          wrong_answers=["c9e1a07 (Dec 2) upgraded libvideo; the other libvideo commit was an earlier attempt.", "a2c8d44 (Dec 1) upgraded libvideo; the other libvideo commit was a later follow-up."]),
        P("mode", "the new decoder default", "/libs/libvideo.json", [["hw-async", "hw async"]], "libvideo 3.0.0 defaults to hw-async.", wrong=[["hw-sync", "hw sync"]],
          wrong_answers=["libvideo 3.0.0 defaults to hw-sync.", "libvideo 3.0.0 turns the hardware decoder off."]),
        P("flag", "who set the flag", "/flags/video.json", [["Kai Bauer", "Bauer"]], "Kai Bauer set video.hw_async to 100 %.", wrong=[["Sina Rahimi", "Rahimi"]],
          wrong_answers=["Sina Rahimi set video.hw_async to 100 %.", "Greta Lindholm set video.hw_async to 100 %."]),
        P("tickets", "support tickets", "/support/tickets.json", [["1377", "1,377"]], "1,377 tickets were about the crash.",
          wrong_answers=["2,418 tickets were about the crash.", "6,920 tickets were about the crash."]),
        P("reviews", "one-star reviews", "/store/reviews.json", [["2418", "2,418"]], "2,418 one-star reviews since the release.",
          wrong_answers=["1,377 one-star reviews since the release.", "6,920 one-star reviews since the release."]),
        P("rollout", "the rollout stage", "/rollout/7.4.0.json", [["50%", "50 %", "50 percent"]], "The rollout is paused at 50 %; the release index shows a cached plan.", wrong=[["20%", "20 %", "20 percent"]], kind="contradiction",
          wrong_answers=["The rollout is paused at 20 %; the rollout record shows a cached plan.", "The rollout is complete at 100 %; the release index is up to date."]),
        P("oncall", "who is on call", "/oncall/rota-droid.json", [["Tuomas Virtanen", "Virtanen"]], "Tuomas Virtanen is on call.", wrong=[["Beatriz Costa", "Costa"], ["Hugo Laurent", "Laurent"]],
          wrong_answers=["Beatriz Costa is on call.", "Hugo Laurent is on call.", "Nadia Karim is on call."]),
    ]
    task = ("who manages the release, its build, the crash-free sessions now, how many crash groups are new, the top crash group "
            "and its events, which OS it hits, the first commit of the chain that led to it, the decoder's new default, who set the "
            "flag, how many support tickets and one-star reviews came in, the rollout stage now, and who is on call.")
    return long_world("mobile-crash-release", "Long route: a crashing mobile release, from release index to on-call (14 calls)", task, route, traps, probes)


def cert_expiry_outage():
    def ep(host, serial, ok):
        return {"host": host, "cert_serial": serial, "handshake": "ok" if ok else "failing"}
    route = [
        ("/outage/OUT-318.json", {"id": "OUT-318", "opened": "2026-12-04T00:03:00Z", "impact": "TLS handshake failures on the mobile API",
                                  "commander": "Ilse de Vries", "deputy": "Rafael Gomez"}),
        ("/endpoints/page1.json", {"page": 1, "pages": 2, "inventory": "46 TLS endpoints in the inventory",
                                   "endpoints": [ep("w-api.kestrel.test", "5C:10:E2", True), ep("auth.kestrel.test", "19:AB:07", True)]}),
        ("/endpoints/page2.json", {"page": 2, "pages": 2,
                                   "endpoints": [ep("m-api.kestrel.test", "7F:3A:91", False), ep("cdn.kestrel.test", "2D:88:C4", True)],
                                   "handshake_error": {"host": "m-api.kestrel.test", "error": "certificate has expired"}}),
        ("/certs/7F3A91.json", {"serial": "7F:3A:91", "subject": "m-api.kestrel.test", "not_after": "2026-12-04T00:00:00Z",
                                "issuer": "Harbor Internal CA G2", "chain_also_signed_by": "Harbor Internal CA G1 (cross-sign, retired)"}),
        ("/renewals/page1.json", {"page": 1, "pages": 2, "order": "newest first", "renewer": "certbot-runner-4", "attempts": [
            {"at": "2026-12-03T23:00:00Z", "result": "failed"}, {"at": "2026-12-03T11:00:00Z", "result": "failed"},
            {"at": "2026-12-02T11:00:00Z", "result": "failed"}]}),
        ("/renewals/page2.json", {"page": 2, "pages": 2, "order": "newest first", "attempts": [
            {"at": "2026-11-29T11:00:00Z", "result": "failed"}, {"at": "2026-11-27T11:00:00Z", "result": "failed", "note": "first failure"},
            {"at": "2026-11-25T11:00:00Z", "result": "renewal not due"}]}),
        ("/acme/errors.json", {"client": "acme-client", "error": "DNS-01 challenge failed: TXT record not found",
                               "record": "_acme-challenge.m-api.kestrel.test"}),
        ("/dns/zone-changes.json", {"zone": "kestrel.test", "changes": [
            {"id": "ZC-5119", "at": "2026-11-20T10:00:00Z", "what": "TTL tuning", "by": "Aiko Mori"},
            {"id": "ZC-5120", "at": "2026-11-26T16:30:00Z", "what": "removed the _acme-challenge delegation to acme-dns", "by": "Bram Visser"}]}),
        ("/certs/owners.json", {"cert": "m-api.kestrel.test", "owner_team": "identity-edge", "sibling_cert": {"cert": "auth.kestrel.test", "owner_team": "identity-core"}}),
        ("/monitoring/cert-alerts.json", {"alert": "cert-expiry-14d", "target": "m-api.kestrel.test", "muted_until": "2026-12-10",
                                          "muted_by": "Chloe Martin", "reason": "noisy during migration"}),
        ("/status/public.json", {"component": "Mobile API", "state": "resolved", "resolved_at": "2026-12-04T00:41:00Z",
                                 "text": "A certificate issue affected the mobile app."}),
        ("/outage/timeline.json", {"outage": "OUT-318", "new_cert_deployed": "2026-12-04T01:09:00Z", "fully_resolved": "2026-12-04T01:17:00Z",
                                   "correction": "The status page was marked resolved before edge caches held the new certificate."}),
        ("/impact/requests.json", {"outage": "OUT-318", "failed_handshakes": 2904118, "mobile_sessions_lost_estimate": "unknown"}),
        ("/oncall/rota-idp-a.json", {"rotation": "rota-idp-a", "primary": "Jonas Lindqvist", "secondary": "Aiko Mori"}),
    ]
    traps = [
        ("/certs/5C10E2.json", {"serial": "5C:10:E2", "subject": "w-api.kestrel.test", "not_after": "2027-03-01T00:00:00Z", "issuer": "Harbor Public CA R3"}),
        ("/oncall/rota-idp-b.json", {"rotation": "rota-idp-b", "primary": "Farah Nadeem", "secondary": "Pieter Smit"}),
    ]
    probes = [
        P("commander", "the outage commander", "/outage/OUT-318.json", [["Ilse de Vries", "de Vries"]], "Ilse de Vries commands OUT-318.", wrong=[["Rafael Gomez", "Gomez"]],
          wrong_answers=["Rafael Gomez commands OUT-318.", "Jonas Lindqvist commands OUT-318."]),
        P("total", "TLS endpoints checked", "/endpoints/page1.json", [["46 endpoints", "46 TLS", "46 tls"]], "46 TLS endpoints in all.",
          wrong_answers=["4 TLS endpoints in all.", "2 TLS endpoints in all."]),
        P("host", "the failing host's handshake error", "/endpoints/page2.json", [["certificate has expired", "expired"]], "m-api.kestrel.test failed: certificate has expired.", partial=[["m-api"]], wrong=[["w-api"]],
          wrong_answers=["m-api.kestrel.test failed: TXT record not found.", "w-api.kestrel.test failed: DNS-01 challenge failed."]),
        P("issuer", "the issuer of the expired certificate", "/certs/7F3A91.json", [["CA G2", "G2"]], "Harbor Internal CA G2 issued it.", wrong=[["CA G1"]],
          wrong_answers=["Harbor Internal CA G1 issued it.", "Harbor Public CA R3 issued it."]),
        P("renewer", "the renewal runner", "/renewals/page1.json", [["certbot-runner-4"]], "certbot-runner-4 renews it.",
          wrong_answers=["acme-client renews it.", "acme-dns renews it."]),
        P("since", "when renewals began to fail", "/renewals/page2.json", [["2026-11-27", "Nov 27", "November 27", "27 Nov"]], "Renewals have failed since 2026-11-27.", wrong=[["2026-12-02"], ["2026-12-03"]], kind="order",
          wrong_answers=["Renewals have failed since 2026-12-02.", "Renewals have failed since 2026-12-03.", "Renewals have failed since 2026-11-25."]),
        P("error", "the renewal error", "/acme/errors.json", [["DNS-01", "dns 01"], ["TXT"]], "The DNS-01 challenge failed: the TXT record was not found.",
          wrong_answers=["The DNS-01 challenge failed: the certificate had already expired.", "The ACME order failed: the issuer CA G1 was retired."]),
        P("zone", "the zone change that broke it", "/dns/zone-changes.json", [["ZC-5120"]], "ZC-5120 removed the challenge delegation.", wrong=[["ZC-5119"]],
          wrong_answers=["ZC-5119 removed the challenge delegation.", "ZC-5119 tuned the TTL of the challenge record."]),
        P("team", "the owning team", "/certs/owners.json", [["identity-edge", "identity edge"]], "identity-edge owns the certificate.", wrong=[["identity-core", "identity core"]],
          wrong_answers=["identity-core owns the certificate.", "certbot-runner-4 owns the certificate."]),
        P("muted", "who muted the expiry alert", "/monitoring/cert-alerts.json", [["Chloe Martin", "Martin"]], "Chloe Martin muted the expiry alert.", wrong=[["Bram Visser", "Visser"]],
          wrong_answers=["Bram Visser muted the expiry alert.", "Aiko Mori muted the expiry alert."]),
        P("resolved", "when the outage was fully resolved", "/outage/timeline.json", [["01:17"]], "Fully resolved at 01:17; the status page marked it resolved too early.", wrong=[["00:41"]], kind="contradiction",
          wrong_answers=["Fully resolved at 00:41; the status page marked it resolved on time.", "Fully resolved at 01:09; the status page marked it resolved too early."]),
        P("failed", "failed handshakes", "/impact/requests.json", [["2904118", "2,904,118", "2.9 million"]], "2,904,118 handshakes failed.",
          wrong_answers=["318 handshakes failed.", "2,904 handshakes failed."]),
        P("oncall", "who is on call", "/oncall/rota-idp-a.json", [["Jonas Lindqvist", "Lindqvist"]], "Jonas Lindqvist is on call.", wrong=[["Aiko Mori"], ["Farah Nadeem", "Nadeem"]],
          wrong_answers=["Aiko Mori is on call.", "Farah Nadeem is on call.", "Pieter Smit is on call."]),
    ]
    task = ("who commands the outage, how many TLS endpoints there are, which host failed and with what error, who issued its certificate, which runner "
            "renews it, since when renewals fail, the renewal error, the zone change that broke it, the owning team, who muted the "
            "expiry alert, when the outage was fully resolved, how many handshakes failed, and who is on call.")
    return long_world("cert-expiry-outage", "Long route: an expired certificate, from outage to on-call (14 calls)", task, route, traps, probes)


SYSTEM = ("You investigate by calling tools. Call exactly one tool per reply, for example:\n```json\n"
          "{\"name\": \"http\", \"arguments\": {\"url\": \"{base}FIRST\"}}\n```\n"
          "When you have the facts, answer in one or two sentences with the names and numbers you found.")

SYSTEM_LONG = ("You investigate by calling tools. Call exactly one tool per reply, for example:\n```json\n"
               "{\"name\": \"http\", \"arguments\": {\"url\": \"{base}FIRST\"}}\n```\n"
               "When you have called every URL, answer every part of the question with the names and numbers you found, one short line each.")

def check_unique_facts(w):
    """Each probe of a long world has a required keyword found in its source body only, so that
    "is this fact still in the context" has one answer (the benchmark's retention column)."""
    if len(w["route"]) < 12:
        return
    bodies = {e["path"]: compact(e["body"]).lower() for e in w["endpoints"]}
    for p in w["probes"]:
        def only_in_source(group):
            vs = group if isinstance(group, list) else [group]
            return all(v.lower() not in b for path, b in bodies.items() if path != p["source"] for v in vs)
        if not any(only_in_source(g) for g in p["required"]):
            raise SystemExit(f'{w["id"]}: probe {p["id"]}: every required keyword also occurs outside {p["source"]}')


def main():
    os.makedirs(OUT, exist_ok=True)
    for w in (runbook_disk(), checkout_incident(), index_crawl(), cdn_purge_storm(), replica_lag_refunds(), mobile_crash_release(), cert_expiry_outage()):
        check_unique_facts(w)
        # The example call in the system prompt is the world's first call (as in mf-agent's real-model test).
        system = SYSTEM if len(w["route"]) < 12 else SYSTEM_LONG
        w = {"id": w["id"], "title": w["title"], "system": system.replace("FIRST", w["endpoints"][0]["path"]), **{k: v for k, v in w.items() if k not in ("id", "title")}}
        with open(os.path.join(OUT, w["id"] + ".json"), "w") as f:
            json.dump(w, f, indent=2, ensure_ascii=False)
            f.write("\n")
        print(w["id"], len(w["route"]), "calls,", len(w["endpoints"]), "endpoints,", len(w["probes"]), "probes,",
              max(len(compact(e["body"])) for e in w["endpoints"]), "chars at most per body")


if __name__ == "__main__":
    main()
