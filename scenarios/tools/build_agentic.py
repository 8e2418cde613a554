#!/usr/bin/env python3
"""Writes the live agentic worlds of scenarios/agentic/ (deterministic: no randomness).

Each world: a question ({base} is replaced by http://127.0.0.1:PORT by the harness),
JSON endpoints with the facts spread over many calls and realistic filler records,
and probes on the final answer: required keywords, and `wrong` values the world
gives for other things (an answer holding one contradicts a tool result).
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
         "required": [["web-07", "web 07"], ["97%", "97 %", "97 percent", "97"]], "wrong": [["web-13"]], "reference": "web-07, at 97 %."},
        {"id": "team", "fact": "the owning team", "source": "/hosts/web-07.json",
         "required": [["media-storage", "media storage"]], "wrong": [["media-render", "media render"]], "reference": "The media-storage team owns it."},
        {"id": "oncall", "fact": "who is on call", "source": "/teams/media-storage.json",
         "required": [["Tomas Berg", "Tomas"]], "partial": [["Priya Raman"]], "wrong": [["Kwame Mensah", "Kwame"]], "reference": "Tomas Berg is on call."},
        {"id": "cause", "fact": "why the cache was not evicted", "source": "/cron/web-07.json",
         "required": [["cache-evict", "eviction", "evict"], ["disabled", "not enabled"]], "partial": [["migration"]],
         "reference": "The cache-evict cron job was disabled during the November migration."},
    ]
    return {"id": "runbook-disk", "title": "Runbook: a nearly full image-cache disk, its owner, on-call and cause",
            "question": q, "endpoints": endpoints, "probes": probes}


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
         "required": [["4817"]], "wrong": [["4816"], ["3311"]], "reference": "Build 4817 of checkout."},
        {"id": "peak", "fact": "the peak error rate", "source": "/metrics/checkout.json",
         "required": [["6.4%", "6.4 %", "6.4 percent", "6.4"]], "wrong": [["6.1%", "6.1"]], "reference": "The error rate peaked at 6.4 %."},
        {"id": "orders", "fact": "failed orders", "source": "/incidents/INC-5521.json",
         "required": [["6404", "6,404"]], "reference": "6,404 orders failed."},
        {"id": "cause", "fact": "the change", "source": "/builds/4817.json",
         "required": [["connection pool", "pool"], ["8"]], "partial": [["64"], ["payment client", "v5"]],
         "reference": "The payment client's connection pool max was lowered from 64 to 8."},
        {"id": "rollback", "fact": "who rolled back", "source": "/deploys/page2.json",
         "required": [["Lena Okafor", "Okafor"]], "wrong": [["Marek Novak"], ["Sara Lindqvist"]], "reference": "Lena Okafor rolled it back (to 4816)."},
    ]
    return {"id": "checkout-incident", "title": "Incident: which deploy broke checkout, how badly, why, and who rolled it back",
            "question": q, "endpoints": endpoints, "probes": probes}


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
         "wrong": [["warehouse_vacuum"]], "reference": "ledger_close failed."},
        {"id": "attempts", "fact": "attempts", "source": "/errors/ledger_close.json", "required": [["3 attempts", "three attempts", "3 times", "three times", "attempted 3", "attempted three", "3 tries"]],
         "partial": [["retry"], ["manual"]], "reference": "It was attempted 3 times (ledger_close, ledger_close_retry, ledger_close_manual)."},
        {"id": "owner", "fact": "owning team", "source": "/jobs/page2.json", "required": [["finance-data", "finance data"]],
         "wrong": [["data-eng"], ["platform"]], "reference": "The finance-data team."},
        {"id": "error", "fact": "the error", "source": "/errors/ledger_close.json", "required": [["deadlock"]], "partial": [["gl_entries"]],
         "reference": "A deadlock on table gl_entries."},
        {"id": "blocker", "fact": "the blocking job", "source": "/errors/ledger_close.json", "required": [["payouts_daily", "payouts daily"]],
         "wrong": [["crm_sync"], ["orders_daily"]], "reference": "payouts_daily held the blocking query."},
    ]
    return {"id": "pipeline-crawl", "title": "Crawl: follow a paginated job index to a failing pipeline job and its cause",
            "question": q, "endpoints": endpoints, "probes": probes}


SYSTEM = ("You investigate by calling tools. Call exactly one tool per reply, for example:\n```json\n"
          "{\"name\": \"http\", \"arguments\": {\"url\": \"{base}FIRST\"}}\n```\n"
          "When you have the facts, answer in one or two sentences with the names and numbers you found.")


def main():
    os.makedirs(OUT, exist_ok=True)
    for w in (runbook_disk(), checkout_incident(), index_crawl()):
        # The example call in the system prompt is the world's first call (as in mf-agent's real-model test).
        w = {"id": w["id"], "title": w["title"], "system": SYSTEM.replace("FIRST", w["endpoints"][0]["path"]), **{k: v for k, v in w.items() if k not in ("id", "title")}}
        with open(os.path.join(OUT, w["id"] + ".json"), "w") as f:
            json.dump(w, f, indent=2, ensure_ascii=False)
            f.write("\n")
        print(w["id"], len(w["endpoints"]), "endpoints,", len(w["probes"]), "probes")


if __name__ == "__main__":
    main()
