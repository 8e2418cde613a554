"""temporal: a sequence of timestamped events; the probes ask order and time."""

from mfscen import Scenario

SYSTEM = ("You are an incident assistant. Tools: http_get(url), sql_query(db, query), run_shell(cmd), read_file(path), "
          "grep_logs(pattern, path, since). Keep exact timestamps (UTC) and build timelines in order.")


def short() -> Scenario:
    s = Scenario("temporal-short", "temporal", "short", "Timeline of a checkout error spike after a config push")
    s.system(SYSTEM)
    s.user("Checkout errors spiked this afternoon. Build me the timeline for the incident review: what happened, and when?")
    s.step("Config changes first.", "http_get", {"url": "http://config.internal/api/changes?since=2026-02-10T13:00Z"},
           {"changes": [{"at": "2026-02-10T14:02:31Z", "key": "checkout.tax_service.timeout_ms", "old": 2000, "new": 200,
                         "by": "a.ferreira", "via": "config-ui", "review": "skipped (hotfix path)",
                         "comment": "fail fast on slow tax lookups"}], "total": 1})
    s.step("At 14:02:31 the tax-service timeout was cut from 2000 to 200 ms. Now the error rate.", "http_get",
           {"url": "http://metrics.internal/api/series?name=checkout_5xx_rate&from=14:00&to=14:30&step=1m"},
           {"points": [["14:04", 0.3], ["14:05", 7.8], ["14:06", 11.2], ["14:19", 10.9], ["14:20", 2.1], ["14:24", 0.4]], "unit": "%"})
    s.step("Errors rose at 14:05 and fell from 14:20, normal by 14:24. Checking the alert and the rollback.", "grep_logs",
           {"pattern": "checkout", "path": "/var/log/alertmanager/notify.log", "since": "2026-02-10T14:00Z"},
           "14:11:02 FIRING CheckoutErrorRateHigh severity=page receiver=oncall-checkout\n"
           "14:11:02 FIRING CheckoutLatencyHigh severity=ticket receiver=checkout-team\n"
           "14:13:40 ACK by j.nakamura\n14:25:15 RESOLVED CheckoutErrorRateHigh\n14:26:30 RESOLVED CheckoutLatencyHigh")
    s.step("Alert at 14:11:02, acknowledged 14:13:40. Who reverted the setting, and when?", "http_get",
           {"url": "http://config.internal/api/changes?since=2026-02-10T14:05Z&key=checkout.tax_service.timeout_ms"},
           {"changes": [{"at": "2026-02-10T14:19:47Z", "key": "checkout.tax_service.timeout_ms", "old": 200, "new": 2000,
                         "by": "j.nakamura", "via": "config-ui", "comment": "revert, tax calls p50 is 340 ms"}]})
    s.step("Checking the tax service's own latency to see why 200 ms was too short.", "http_get",
           {"url": "http://metrics.internal/api/latency?service=tax-service&from=13:30&to=14:30"},
           {"service": "tax-service", "p50_ms": 340, "p95_ms": 910, "p99_ms": 1480, "calls": 51877,
            "timeouts_by_client": {"checkout": 20411, "invoicing": 0}})
    s.step("Most checkout calls to the tax service timed out under the new limit; invoicing, with its own timeout, was unaffected. "
           "Looking up the post-incident review template.", "read_file", {"path": "/docs/templates/pir.md"},
           "# Post-incident review\n## Summary\n## Timeline (UTC)\n## Impact\n## Contributing factors\n## Actions")
    s.probe("temporal_ordering", "When was the configuration pushed, and when did the alert fire?",
            [["14:02"], ["14:11"]], [["14:05"], "a.ferreira"],
            "The timeout change was pushed at 14:02:31 UTC; errors rose at 14:05 and the alert fired at 14:11:02.",
            wrong=["The timeout change was pushed at 14:05 UTC; errors rose at 14:11 and the alert fired at 14:13:40.",
                   "The timeout change was pushed at 14:02:31 UTC; errors rose at 14:05 and the alert fired at 14:19:47.",
                   "The timeout change was pushed at 14:19:47 UTC; errors rose at 14:20 and the alert fired at 14:25:15."])
    s.probe("temporal_ordering", "At what time was the change reverted, and when was the error rate back to normal?",
            [["14:19"], ["14:24"]], [["14:20"], ["14:25"], "nakamura"],
            "j.nakamura reverted it at 14:19:47 UTC; errors fell from 14:20 and were normal by 14:24 (alert resolved 14:25:15).",
            wrong=["a.ferreira reverted it at 14:02:31 UTC; errors fell from 14:05 and were normal by 14:11 (alert resolved "
                    "14:13:40).",
                   "j.nakamura reverted it at 14:13:40 UTC; errors fell from 14:20 and were normal by 14:26 (alert resolved "
                    "14:25:15)."])
    s.probe("causal_fidelity", "Why did the configuration change cause checkout errors?",
            [["200 ms", "200ms", "200 milliseconds"], ["340", "p50", "median"]], [["timeout"], ["2000", "2,000", "2 s"]],
            "The tax-service timeout was cut from 2000 ms to 200 ms, but tax calls take about 340 ms at p50, so most of them "
            "timed out and checkouts failed.",
            wrong=["The tax-service timeout was raised from 200 ms to 2000 ms, so slow tax calls held checkout threads and "
                    "checkouts failed.",
                   "The tax service itself slowed down to about 1480 ms at p99, so its calls failed for checkout and "
                    "invoicing alike."])
    return s


def medium() -> Scenario:
    s = Scenario("temporal-medium", "temporal", "medium", "Sequence of a schema migration that triggered a failover")
    s.system(SYSTEM + " Database: Postgres cluster orders-pg (primary + 2 replicas) managed by Patroni.")
    s.user("Last night's orders-pg migration ended with an unplanned failover. Reconstruct the sequence of events.")
    s.step("The migration runner log first.", "grep_logs", {"pattern": "migration", "path": "/var/log/migrate/orders.log", "since": "2026-07-09"},
           "03:10:44 migration 0142_add_fulfilment_cols started (runner m-07)\n"
           "03:12:05 ALTER TABLE orders ADD COLUMN ... acquired ACCESS EXCLUSIVE lock\n"
           "03:33:50 migration 0142 finished (rewrite of 214 GB)")
    s.step("Started 03:10:44, exclusive lock at 03:12:05, finished 03:33:50. Now replication lag.", "http_get",
           {"url": "http://metrics.internal/api/series?name=pg_replication_lag_seconds&cluster=orders-pg&from=03:00&to=03:45&step=5m"},
           {"points": [["03:10", 0.4], ["03:15", 96], ["03:20", 233], ["03:25", 412], ["03:30", 388], ["03:35", 21], ["03:40", 0.6]]})
    s.step("Lag peaked at 412 s around 03:25. Checking Patroni for the failover.", "grep_logs",
           {"pattern": "failover|leader", "path": "/var/log/patroni/orders-pg-1.log", "since": "2026-07-09T03:00Z"},
           "03:29:58 WARNING health check of orders-pg-1 timed out (statement_timeout on probe, table lock)\n"
           "03:31:09 INFO promoting orders-pg-2 to leader (failover, reason: leader unhealthy)\n"
           "03:31:12 INFO orders-pg-1 demoted, rejoining as replica")
    s.step("Failover at 03:31:09, about 2.5 minutes before the migration finished. Did the app see errors?", "http_get",
           {"url": "http://metrics.internal/api/series?name=orders_api_5xx&from=03:25&to=03:40&step=1m"},
           {"points": [["03:30", 12], ["03:31", 1840], ["03:32", 910], ["03:33", 33], ["03:34", 4]]})
    s.say("Orders-api errors spiked right at the failover minute (1,840 at 03:31) and settled by 03:34.")
    s.step("Checking whether the health probe ignores table locks.", "read_file", {"path": "/etc/patroni/orders-pg.yml"},
           "postgresql:\n  parameters:\n    statement_timeout: 0\nbootstrap:\n  dcs:\n    ttl: 30\n    loop_wait: 10\n"
           "watchdog:\n  mode: off\ncallbacks:\n  health_check: /usr/local/bin/pg-probe --query 'SELECT count(*) FROM orders LIMIT 1' --timeout 5s")
    s.say("The custom health probe reads from orders itself, which the migration's exclusive lock blocks, so the probe timed "
          "out and Patroni declared a healthy leader dead.")
    s.filler(9, seed=142, ctx={"host": "orders-pg-1", "services": ["orders-api", "patroni", "pgbouncer"],
                               "ns": "orders", "db": "orders_ro", "repo": "orders-db"},
             first_text="Now the rest of the stack, to be sure nothing else took part.")
    s.step("Last, whether a migration window was announced.", "http_get",
           {"url": "http://changes.internal/api/changes?component=orders-pg&limit=1"},
           {"changes": [{"id": "CHG-5170", "window": "03:00-04:00", "risk": "medium", "approved_by": "db-council"}]})
    s.say("The change was announced and approved for a 03:00-04:00 window, so the timing itself was as planned.")
    s.probe("temporal_ordering", "When did the migration take its exclusive lock, and when did the failover happen?",
            [["03:12"], ["03:31"]], [["03:10:44", "03:10"], ["orders-pg-2"]],
            "The migration took the ACCESS EXCLUSIVE lock at 03:12:05 (it started at 03:10:44); the failover promoting "
            "orders-pg-2 happened at 03:31:09.",
            wrong=["The migration took the ACCESS EXCLUSIVE lock at 03:10:44 (it started at 03:00); the failover promoting "
                    "orders-pg-2 happened at 03:33:50.",
                   "The migration took the ACCESS EXCLUSIVE lock at 03:12:05 (it started at 03:10:44); the failover promoting "
                    "orders-pg-2 happened at 03:29:58.",
                   "The migration took the ACCESS EXCLUSIVE lock at 03:25 (at the peak of the lag); the failover promoting "
                    "orders-pg-1 happened at 03:31:09."])
    s.probe("temporal_ordering", "How long before the end of the migration did the failover happen, and at what time did the migration end?",
            [["03:33"]], [["03:31"], ["2.5 minutes", "2 minutes 41", "2 min 41", "2m41", "two and a half", "about 2 minutes", "3 minutes"]],
            "Before: the failover was at 03:31:09 and the migration only finished at 03:33:50.",
            wrong=["After: the failover was at 03:31:09 and the migration had already finished at 03:12:05.",
                   "Before: the failover was at 03:31:09 and the migration only finished at 03:40.",
                   "After: the migration finished at 03:31:09 and the failover only came at 03:35."])
    s.probe("fact_retention", "What was the peak replication lag, and how many API errors were logged in the worst minute?",
            [["412"], ["1,840", "1840"]], [["03:25"], ["03:31"]],
            "Replication lag peaked at 412 s around 03:25; orders-api logged 1,840 5xx errors at 03:31.",
            wrong=["Replication lag peaked at 388 s around 03:30; orders-api logged 910 5xx errors at 03:32.",
                   "Replication lag peaked at 233 s around 03:20; orders-api logged 1,840 5xx errors at 03:31.",
                   "Replication lag peaked at 412 s around 03:25; orders-api logged 214 5xx errors at 03:31."])
    return s


def long() -> Scenario:
    s = Scenario("temporal-long", "temporal", "long", "Timeline of a leaked service-account credential")
    s.system(SYSTEM + " Identity provider: idp.internal; data API: data.internal. All times UTC.")
    s.user("Security flagged unusual exports by the service account svc-reporting. Build the exact timeline from first "
           "suspicious login to containment.")
    s.step("IdP sign-in log for the account.", "http_get", {"url": "http://idp.internal/api/audit?actor=svc-reporting&from=2026-05-02"},
           {"events": [{"at": "2026-05-03T08:14:22Z", "type": "login", "ip": "203.0.113.77", "asn": "AS64511 (VPS hoster)", "mfa": "not_required"},
                       {"at": "2026-05-03T08:16:05Z", "type": "token_created", "token_id": "tok_9f3a21", "scopes": ["data:export"], "ttl_days": 90}]})
    s.step("Login from 203.0.113.77 at 08:14:22, then a 90-day export token tok_9f3a21 at 08:16:05. Now what that token did.", "http_get",
           {"url": "http://data.internal/api/audit?token=tok_9f3a21"},
           {"events": [{"at": "2026-05-03T08:40:11Z", "action": "export", "dataset": "customers_eu", "rows": 182440},
                       {"at": "2026-05-03T08:52:37Z", "action": "export", "dataset": "invoices_2025", "rows": 96012},
                       {"at": "2026-05-03T09:05:58Z", "action": "export", "dataset": "contracts", "rows": 4310}]})
    s.step("Three exports between 08:40:11 and 09:05:58. When did detection and containment happen?", "grep_logs",
           {"pattern": "svc-reporting|tok_9f3a21", "path": "/var/log/secops/actions.log", "since": "2026-05-03"},
           "11:52:30 ALERT DLP rule 'bulk export by service account' fired for svc-reporting\n"
           "12:07:14 ACTION token tok_9f3a21 revoked by h.osei\n12:09:40 ACTION svc-reporting password rotated, sessions killed by h.osei")
    s.step("Alert at 11:52:30, revocation 12:07:14 and rotation 12:09:40. Where could the password have leaked from?", "grep_logs",
           {"pattern": "svc-reporting", "path": "/srv/git-audit/public-pushes.log", "since": "2026-04-25"},
           "2026-05-02T21:47:09Z repo github.com/acme-labs/report-scripts (public) commit 5e1d0c7 added .env containing SVC_REPORTING_PASSWORD")
    s.say("The password was pushed in a .env file to a public repository the evening before, at 21:47:09 on 2 May, about ten "
          "and a half hours before the first foreign login. I'll check the rest of the estate before finalising the timeline.")
    s.filler(29, seed=9321, ctx={"host": "data.internal", "services": ["data-api", "idp", "report-runner"],
                                 "ns": "platform", "db": "audit_ro", "repo": "platform-config"},
             first_text="Beginning with the systems the account can reach.")
    s.step("Last, the retention of the DLP alert evidence.", "read_file", {"path": "/etc/secops/retention.yaml"},
           "dlp_alerts:\n  keep_days: 365\nexport_audit:\n  keep_days: 730")
    s.say("Evidence is kept long enough for the review and any notification duties.")
    s.probe("temporal_ordering", "What happened first: the public leak of the password, the foreign login, or the token creation? Give the times.",
            [["21:47"], ["08:14"], ["08:16"]], [["203.0.113.77"], ["tok_9f3a21"]],
            "First the password leaked in a public commit at 21:47:09 on 2 May, then the login from 203.0.113.77 at 08:14:22 on "
            "3 May, then token tok_9f3a21 was created at 08:16:05.",
            wrong=["First the login from 203.0.113.77 at 08:14:22 on 3 May, then token tok_9f3a21 was created at 08:16:05, "
                    "and only then the password leaked in a public commit at 08:40:11.",
                   "First the login from 203.0.113.77 at 08:14:22 on 3 May, then the password leaked in a public commit at "
                    "08:40:11, then token tok_9f3a21 was created at 11:52:30.",
                   "First token tok_9f3a21 was created at 21:47:09 on 2 May, then the login from 203.0.113.77 at 08:14:22 on "
                    "3 May, then the password leaked in a public commit at 12:09:40."])
    s.probe("temporal_ordering", "When was the first export, when did the alert fire, and when was the token revoked?",
            [["08:40"], ["11:52"], ["12:07"]], [["customers_eu"], ["h.osei", "osei"]],
            "The first export (customers_eu) ran at 08:40:11, the DLP alert fired at 11:52:30, and h.osei revoked the token at 12:07:14.",
            wrong=["The first export (contracts) ran at 09:05:58, the DLP alert fired at 11:52:30, and h.osei revoked the "
                    "token at 12:09:40.",
                   "The first export (customers_eu) ran at 08:40:11, the DLP alert fired at 08:52:37, and h.osei revoked the "
                    "token at 12:07:14.",
                   "The first export (invoices_2025) ran at 08:52:37, the DLP alert fired at 12:07:14, and h.osei revoked the "
                    "token at 12:09:40."])
    s.probe("entity_recall", "Which datasets were exported with the stolen token, and from which IP address did the login come?",
            [["customers_eu"], ["invoices_2025"], ["contracts"], ["203.0.113.77"]], [["182,440", "182440"], ["AS64511", "VPS"]],
            "customers_eu (182,440 rows), invoices_2025 (96,012 rows) and contracts (4,310 rows) were exported; the login came "
            "from 203.0.113.77 (AS64511, a VPS hoster).",
            wrong=["customers_eu (182,440 rows), invoices_2025 (96,012 rows) and contracts (4,310 rows) were exported; the "
                    "login came from github.com/acme-labs (a public repository).",
                   "customers_eu (182,440 rows) and invoices_2025 (96,012 rows) were exported, nothing else; the login came "
                    "from 203.0.113.77 (AS64511, a VPS hoster).",
                   "customers_eu (182,440 rows), invoices_2025 (96,012 rows) and report-scripts (4,310 rows) were exported; "
                    "the login came from 203.0.113.77 (AS64511, a VPS hoster)."])
    return s


def build():
    return [short(), medium(), long()]
