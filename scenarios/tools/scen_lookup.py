"""lookup: one decisive tool result among many."""

from mfscen import Scenario

SYSTEM = ("You are an investigation assistant for the operations team. You can call tools: "
          "http_get(url), sql_query(db, query), run_shell(cmd), read_file(path), list_dir(path), grep_logs(pattern, path, since). "
          "Work step by step, cite what the tools returned, and never invent data.")


def short() -> Scenario:
    s = Scenario("lookup-short", "lookup", "short", "Find the duplicate March charge of a freight customer")
    s.system(SYSTEM)
    s.user("Halvorsen Freight says they were billed twice for March. Find out which charge is the duplicate "
           "so finance can refund the right one.")
    s.step("I'll look the customer up in the billing API first.", "http_get",
           {"url": "http://billing.internal/v2/customers?name=Halvorsen"},
           {"customers": [{"id": "cus_8841H", "name": "Halvorsen Freight AS", "plan": "fleet-pro",
                           "currency": "NOK", "billing_email": "ap@halvorsen-freight.no"}]})
    s.step("One match. Now their invoices for March 2026.", "http_get",
           {"url": "http://billing.internal/v2/invoices?customer=cus_8841H&period=2026-03"},
           {"invoices": [
               {"id": "inv_30571", "amount": "18450.00", "currency": "NOK", "status": "paid",
                "created": "2026-03-01T02:00:11Z", "created_by": "billing-cron", "payment_intent": "pi_5Rk2aa",
                "lines": [{"desc": "Fleet Pro, 41 vehicles x 450.00", "amount": "18450.00"}]},
               {"id": "inv_30602", "amount": "18450.00", "currency": "NOK", "status": "paid",
                "created": "2026-03-01T02:14:37Z", "created_by": "retry-worker", "payment_intent": "pi_5Rk9xe",
                "lines": [{"desc": "Fleet Pro, 41 vehicles x 450.00", "amount": "18450.00"}]}],
            "total": 2})
    s.step("Two paid invoices with the same amount, 14 minutes apart; the second was created by retry-worker. "
           "Let me see why the retry ran.", "grep_logs",
           {"pattern": "cus_8841H", "path": "/var/log/billing/retry-worker.log", "since": "2026-03-01"},
           "2026-03-01T02:13:02Z WARN charge cus_8841H inv_30571: gateway response timeout after 60 s, marking unpaid\n"
           "2026-03-01T02:13:40Z INFO webhook payment_intent.succeeded pi_5Rk2aa arrived late (ignored: invoice already marked unpaid)\n"
           "2026-03-01T02:14:37Z INFO re-issued invoice inv_30602 for cus_8841H without idempotency key (legacy path)")
    s.step("So the first charge did succeed; the worker gave up on a gateway timeout and re-charged through a legacy path "
           "with no idempotency key. Checking whether a refund exists already.", "http_get",
           {"url": "http://billing.internal/v2/refunds?customer=cus_8841H"},
           {"refunds": [], "total": 0, "credit_notes": [], "disputes": [], "last_contact": "2026-03-04 support ticket SUP-77310 'double charge March'"})
    s.say("No refund has been issued yet, so nothing has been returned to them so far. I can draft the note for finance "
          "whenever you want it.")
    s.probe("fact_retention", "Which invoice is the duplicate that finance should refund?",
            [["inv_30602", "30602"]], [["18450", "18,450", "18 450"], ["retry-worker", "retry worker"]],
            "The duplicate is invoice inv_30602 (18,450.00 NOK), created at 02:14 by the retry-worker.",
            wrong=["The duplicate is invoice inv_30571 (18,450.00 NOK), created at 02:00 by the billing-cron.",
                   "The duplicate is the charge pi_5Rk2aa (18,450.00 NOK), made at 02:00 by the billing-cron.",
                   "There is no duplicate: refund SUP-77310 (18,450.00 NOK) was already issued on 2026-03-04."])
    s.probe("causal_fidelity", "Why was the customer charged a second time?",
            [["timeout", "timed out"], ["idempotency"]], [["retry-worker", "retry worker"], "legacy", ["webhook", "late"]],
            "The gateway timed out after 60 s so the retry-worker marked the first invoice unpaid (its success webhook arrived late) "
            "and re-charged via a legacy path without an idempotency key.",
            wrong=["The first charge was declined by the gateway, so the retry-worker re-charged it with a fresh idempotency "
                    "key; the decline webhook then arrived late and was ignored.",
                   "The billing-cron created both invoices in one run because the customer has 41 vehicles on the fleet-pro "
                    "plan, and the late webhook confirmed both charges.",
                   "Support ticket SUP-77310 made finance re-issue the March invoice by hand, and the gateway accepted it "
                    "because the first payment's webhook had not arrived yet."])
    s.probe("entity_recall", "What is the billing system's internal customer id for this customer, and which plan are they on?",
            [["cus_8841H", "8841H"]], [["fleet-pro", "fleet pro"], "NOK"],
            "The customer id is cus_8841H, on the fleet-pro plan billed in NOK.",
            wrong=["The customer id is pi_5Rk9xe, on the fleet-pro plan billed in NOK.",
                   "The customer id is inv_30571, on the fleet-pro plan billed in NOK.",
                   "The customer id is SUP-77310, on the fleet-pro plan billed in NOK."])
    return s


def medium() -> Scenario:
    s = Scenario("lookup-medium", "lookup", "medium", "Checkout button missing for Safari users: find the responsible flag")
    s.system(SYSTEM + " The storefront is a React app served through a CDN; feature flags live in the flag service.")
    s.user("Since yesterday evening, support has tickets saying the checkout button is gone for people on Safari. "
           "Chrome users are fine. What is causing it?")
    s.step("I'll start with the storefront release history.", "http_get",
           {"url": "http://deploy.internal/api/releases?app=storefront&limit=3"},
           {"releases": [{"version": "web-2026.05.19.2", "at": "2026-05-19T09:12Z", "notes": "copy changes on PDP"},
                         {"version": "web-2026.05.18.1", "at": "2026-05-18T08:40Z", "notes": "image lazy-loading"},
                         {"version": "web-2026.05.15.3", "at": "2026-05-15T13:05Z", "notes": "footer links"}]})
    s.step("No release yesterday evening, and none of these touch checkout. Let me check the browser error tracker.", "http_get",
           {"url": "http://errors.internal/api/issues?project=storefront&browser=Safari&since=24h"},
           {"issues": [{"title": "ResizeObserver loop limit exceeded", "events": 212, "first_seen": "2026-04-02"},
                       {"title": "Failed to fetch /api/recommendations", "events": 9, "first_seen": "2026-05-20"}]})
    s.step("Those are old noise and a minor fetch failure; nothing that would hide a button. Checking the CDN for a bad cached bundle.",
           "http_get", {"url": "http://cdn-admin.internal/api/purges?since=48h"},
           {"purges": [{"path": "/static/js/*", "at": "2026-05-19T09:14Z", "by": "deploy-bot"}]})
    s.step("The only purge matches the morning release. I'll compare what Safari and Chrome receive for the checkout bundle.",
           "run_shell", {"cmd": "curl -sI -A 'Safari/605.1.15' https://shop.example/static/js/checkout.js | head -4; curl -sI -A 'Chrome/124' https://shop.example/static/js/checkout.js | head -4"},
           "HTTP/2 200\netag: \"9f1c-66a2\"\ncontent-length: 48213\ncache-control: max-age=31536000\n"
           "HTTP/2 200\netag: \"9f1c-66a2\"\ncontent-length: 48213\ncache-control: max-age=31536000")
    s.step("Same bundle for both browsers, so the difference must be decided at runtime. Listing flags that evaluate on the user agent.",
           "http_get", {"url": "http://flags.internal/api/flags?attribute=user_agent"},
           {"flags": [{"key": "promo_banner_spring", "enabled": True, "updated": "2026-05-02"},
                      {"key": "checkout_v3_layout", "enabled": True, "updated": "2026-05-20T18:47Z"},
                      {"key": "legacy_polyfills", "enabled": False, "updated": "2026-03-11"}]})
    s.step("checkout_v3_layout changed at 18:47 yesterday, which fits 'since yesterday evening'. Opening its audit log.",
           "http_get", {"url": "http://flags.internal/api/flags/checkout_v3_layout/audit?limit=2"},
           {"flag": "checkout_v3_layout", "entries": [
               {"at": "2026-05-20T18:47:05Z", "actor": "m.okafor",
                "change": "rule added: user_agent contains 'Safari' AND NOT contains 'Chrome' -> variant 'v3', rollout 35%",
                "comment": "start v3 layout test on WebKit"},
               {"at": "2026-05-12T10:02:44Z", "actor": "t.lindqvist", "change": "flag created, default variant 'v2'"}]})
    s.step("That is the change: a rule routing Safari to the 'v3' variant. Let me check how the storefront renders 'v3'.",
           "grep_logs", {"pattern": "checkout_v3_layout", "path": "/srv/storefront/src/**/*.tsx", "since": "all"},
           "src/checkout/CheckoutPanel.tsx:41:  if (flags.checkout_v3_layout === 'v3') return <CheckoutV3 />;\n"
           "src/checkout/CheckoutV3.tsx:12:  // TODO(payment-btn): PayButton not wired yet, placeholder only\n"
           "src/checkout/CheckoutV3.tsx:88:  {/* <PayButton /> */}")
    s.step("The v3 component still has the pay button commented out, so anyone in the rollout sees no button. "
           "I'll confirm with the flag evaluation for a Safari test user.", "http_get",
           {"url": "http://flags.internal/api/evaluate?flag=checkout_v3_layout&user=test-4471&ua=Safari/605.1.15"},
           {"flag": "checkout_v3_layout", "variant": "v3", "reason": "RULE_MATCH", "rule_index": 0})
    s.step("Confirmed. Checking how many sessions are affected per the analytics API.", "http_get",
           {"url": "http://analytics.internal/api/funnels/checkout?since=2026-05-20T18:00Z&group=browser"},
           {"groups": [{"browser": "Chrome", "reached_checkout": 18220, "clicked_pay": 6105},
                       {"browser": "Safari", "reached_checkout": 7410, "clicked_pay": 1581},
                       {"browser": "Firefox", "reached_checkout": 1930, "clicked_pay": 640}]})
    s.filler(6, seed=1205, ctx={"host": "api.internal", "services": ["storefront", "cart-api", "pricing"],
                                "ns": "shop", "db": "shop_ro", "repo": "storefront"},
             first_text="Safari's pay click rate is clearly lower than Chrome's.")
    s.step("To make sure nothing else is involved, I'll check the pricing service error budget.", "http_get",
           {"url": "http://slo.internal/api/slo/pricing-availability"},
           {"slo": "pricing-availability", "target": "99.9", "current": "99.97", "budget_remaining": "71%"})
    s.say("Pricing is within its error budget, so it plays no part. I have enough to propose a fix and can write it up "
          "for the storefront team when you are ready.")
    s.probe("entity_recall", "Which feature flag is responsible, and who made the change that triggered it?",
            [["checkout_v3_layout", "checkout v3 layout"], ["okafor"]], ["18:47", ["safari", "webkit"]],
            "The flag checkout_v3_layout; m.okafor added the Safari rule on 2026-05-20 at 18:47 UTC.",
            wrong=["The flag checkout_v3_layout; t.lindqvist added the Safari rule on 2026-05-12 at 10:02 UTC.",
                   "The flag promo_banner_spring; m.okafor added the Safari rule on 2026-05-02 at 18:47 UTC.",
                   "The flag legacy_polyfills; deploy-bot added the Safari rule on 2026-05-19 at 09:14 UTC."])
    s.probe("fact_retention", "What share of matching users does the new rule send to the broken variant?",
            [["35%", "35 %", "35 percent"]], [["safari", "webkit"], "chrome"],
            "35% of Safari (non-Chrome) users are routed to the 'v3' variant.",
            wrong=["All Safari (non-Chrome) users are routed to the 'v3' variant, with no rollout cap.",
                   "71% of Safari (non-Chrome) users are routed to the 'v3' variant."])
    s.probe("causal_fidelity", "Why does that variant make the checkout button disappear?",
            [["PayButton", "pay button"], ["commented out", "not wired", "placeholder"]], ["CheckoutV3", ["checkout_v3_layout", "v3 layout"]],
            "The v3 layout component CheckoutV3 still has the PayButton commented out (not wired yet), so users in the v3 "
            "variant see no checkout button.",
            wrong=["The v3 layout's checkout.js is served from a stale CDN cache to Safari, so users in the v3 variant see no "
                    "checkout button.",
                   "The v3 layout throws 'ResizeObserver loop limit exceeded' in Safari, so users in the v3 variant see no "
                    "checkout button.",
                   "The v3 layout fails to fetch /api/recommendations in Safari, so the PayButton never renders for users in "
                    "the v3 variant."])
    return s


def long() -> Scenario:
    s = Scenario("lookup-long", "lookup", "long", "Payroll host cannot reach the bank's SFTP server")
    s.system(SYSTEM + " The payroll batch runs on host pay-batch-01 in data centre dc1.")
    s.user("The payroll batch failed overnight: it could not upload the payment file to the bank's SFTP server. "
           "Find out what is blocking the connection.")
    s.step("First, the batch log.", "grep_logs", {"pattern": "sftp", "path": "/var/log/payroll/batch.log", "since": "24h"},
           "02:00:03 INFO connecting to sftp.nordbank.example:22\n"
           "02:00:33 ERROR connect timeout after 30 s (attempt 1/3)\n"
           "02:01:33 ERROR connect timeout after 30 s (attempt 3/3)\n"
           "02:01:33 FATAL upload of PAY-20260611.xml aborted")
    s.step("Timeouts rather than refusals, which smells like packets being dropped. Resolving the host.", "run_shell",
           {"cmd": "dig +short sftp.nordbank.example"}, "185.61.4.22")
    s.step("It resolves to 185.61.4.22. Testing reachability from the host.", "run_shell",
           {"cmd": "ssh pay-batch-01 'nc -vz -w 5 185.61.4.22 22; traceroute -n -m 4 185.61.4.22'"},
           "nc: connect to 185.61.4.22 port 22 (tcp) timed out: Operation now in progress\n"
           "traceroute to 185.61.4.22, 4 hops max\n 1  10.20.0.1  0.4 ms\n 2  10.0.255.1  0.9 ms\n 3  * * *\n 4  * * *")
    s.step("Traffic dies after the core router 10.0.255.1, where the egress firewall sits. Querying the firewall for matching rules.",
           "http_get", {"url": "http://fw-mgmt.dc1.internal/api/policies/dc1-egress/match?src=10.20.4.15&dst=185.61.4.22&port=22"},
           {"policy": "dc1-egress", "matched_rule": {"id": 718, "action": "deny", "src": "10.20.0.0/16",
            "dst": "185.61.4.0/24", "service": "tcp/22", "hits_24h": 9,
            "created": "2026-06-09T16:20:00Z", "created_by": "j.varga", "ticket": "NET-5530",
            "comment": "cleanup: old Nordbank range, decommissioned per vendor list"}})
    s.step("Rule 718 denies exactly this traffic. Let me read ticket NET-5530 to see why it was added.", "http_get",
           {"url": "http://tickets.local/api/issues/NET-5530"},
           {"key": "NET-5530", "summary": "Remove egress to decommissioned partner ranges", "assignee": "j.varga",
            "status": "Done", "description": "Vendor spreadsheet lists 185.61.4.0/24 as retired by Nordbank in May. "
            "Replace allow rules with explicit denies."})
    s.say("So the block comes from a cleanup change: the range was wrongly believed retired, but the bank's SFTP host still lives "
          "in it. Before recommending the fix I'll go through the rest of the path to be sure nothing else breaks the upload.")
    s.filler(27, seed=7718, ctx={"host": "pay-batch-01", "services": ["payroll-batch", "hr-api", "ledger-export"],
                                 "ns": "finance", "db": "payroll_ro", "repo": "payroll"},
             first_text="First the local side.")
    s.step("Last check: whether the bank publishes a status page for its SFTP service.", "http_get",
           {"url": "https://status.nordbank.example/api/components"},
           {"components": [{"name": "Corporate SFTP", "status": "operational"}, {"name": "Online banking", "status": "operational"}]})
    s.say("The bank reports its service as operational, so the problem is entirely on our side. I'm ready to write up the "
          "fix and the re-run of the batch.")
    s.probe("fact_retention", "Which firewall rule is blocking the upload, and in which policy?",
            [["718"], ["dc1-egress"]], ["deny", ["185.61.4.0/24", "185.61.4"]],
            "Rule 718 in policy dc1-egress denies tcp/22 from 10.20.0.0/16 to 185.61.4.0/24.",
            wrong=["Rule 5530 in policy dc1-egress denies tcp/22 from 10.20.0.0/16 to 185.61.4.0/24.",
                   "Rule 718 in policy fw-mgmt denies tcp/22 from 10.20.4.15 to 185.61.4.22.",
                   "Router 10.0.255.1 in data centre dc1 drops tcp/22 from 10.20.0.0/16 to 185.61.4.0/24."])
    s.probe("entity_recall", "Who added the blocking rule, and under which ticket?",
            [["varga"], ["NET-5530", "5530"]], ["cleanup", "2026-06-09"],
            "j.varga added it on 2026-06-09 under ticket NET-5530.",
            wrong=["j.varga added it on 2026-06-09 under ticket OPS-1168.",
                   "d.haas added it on 2026-06-09 under ticket NET-5530.",
                   "a.berg added it on 2026-06-11 under ticket OPS-1513."])
    s.probe("causal_fidelity", "Why was that rule added in the first place?",
            [["decommission", "retired"], ["spreadsheet", "vendor"]], ["cleanup", ["185.61.4", "nordbank"]],
            "It was part of a cleanup: a vendor spreadsheet listed 185.61.4.0/24 as retired/decommissioned by Nordbank, "
            "but the bank's SFTP host 185.61.4.22 is still in that range.",
            wrong=["It was part of an incident response: Nordbank's status page reported its SFTP service down, so "
                    "185.61.4.0/24 was blocked until the bank's host 185.61.4.22 recovered.",
                   "It was part of a DNS change: sftp.nordbank.example moved out of 185.61.4.0/24, so the old range was "
                    "blocked, but the resolver still returns 185.61.4.22.",
                   "It was part of a cleanup: the payroll host pay-batch-01 was listed as decommissioned, so its egress to "
                    "185.61.4.0/24 was denied, though the host still runs the batch."])
    return s


def build():
    return [short(), medium(), long()]
