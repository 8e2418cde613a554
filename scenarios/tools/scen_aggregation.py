"""aggregation: many individual data points whose totals and counts matter."""

from mfscen import Scenario

SYSTEM = ("You are an analytics and operations assistant. Tools: http_get(url), sql_query(db, query), run_shell(cmd), "
          "read_file(path), grep_logs(pattern, path, since). Add numbers carefully and show the totals you compute.")


def short() -> Scenario:
    s = Scenario("aggregation-short", "aggregation", "short", "Failed checkouts per shop during a payment outage")
    s.system(SYSTEM)
    s.user("Last night's payment provider outage: how many checkouts failed across our EU shops, and what revenue was at stake?")
    s.step("Getting the outage window first.", "http_get", {"url": "http://status.internal/api/incidents?component=payments&limit=1"},
           {"incidents": [{"id": "INC-2291", "provider": "PayNova", "start": "2026-11-19T01:12Z", "end": "2026-11-19T01:58Z"}]})
    s.step("Window 01:12-01:58 UTC. Counting failed checkouts in the eu-central shops.", "sql_query",
           {"db": "orders_eu_central", "query": "SELECT shop, count(*), sum(total_eur) FROM checkouts WHERE status='payment_failed' AND created BETWEEN '2026-11-19 01:12' AND '2026-11-19 01:58' GROUP BY shop"},
           {"columns": ["shop", "count", "sum"], "rows": [["Germany", 412, 18204.10], ["Netherlands", 133, 5101.75], ["Austria", 61, 2640.00]]})
    s.step("Now the eu-south shops.", "sql_query",
           {"db": "orders_eu_south", "query": "SELECT shop, count(*), sum(total_eur) FROM checkouts WHERE status='payment_failed' AND created BETWEEN '2026-11-19 01:12' AND '2026-11-19 01:58' GROUP BY shop"},
           {"columns": ["shop", "count", "sum"], "rows": [["France", 287, 12915.60], ["Italy", 96, 3880.40], ["Spain", 58, 2129.15]]})
    s.step("Adding up the six shops: 412 + 133 + 61 + 287 + 96 + 58 = 1,047 failed checkouts, worth EUR 44,871.00 in total. "
           "Germany was hit hardest with 412. Some customers retry, so I'll check how many of those orders were completed later.",
           "sql_query", {"db": "orders_eu_central", "query": "SELECT count(*) FROM checkouts c JOIN retries r ON r.original_id = c.id WHERE c.status='payment_failed' AND r.status='paid' AND c.created BETWEEN '2026-11-19 01:12' AND '2026-11-19 01:58'"},
           {"columns": ["count"], "rows": [[214]], "note": "query spans both regions via the federated retries view"})
    s.step("214 were recovered by a later successful retry, leaving 833 checkouts really lost. Checking the provider's own report.",
           "http_get", {"url": "https://status.paynova.example/api/incidents/latest"},
           {"title": "Degraded authorisations in EU", "status": "resolved", "impact": "minor", "updates": 4})
    s.step("The provider calls it minor. Last, whether support has a ticket to contact affected customers.", "http_get",
           {"url": "http://tickets.local/api/search?q=INC-2291"},
           {"total": 1, "items": [{"key": "SUP-90377", "summary": "Outreach to customers with failed payments (INC-2291)",
                                   "status": "open", "assignee": "support-eu", "created": "2026-11-19T07:05Z"}]})
    s.probe("fact_retention", "How many checkouts failed in total across the EU shops, and how much money did they represent?",
            [["1,047", "1047", "1 047"], ["44,871", "44871", "44 871"]], ["six shops", "EUR"],
            "1,047 checkouts failed across the six EU shops, worth EUR 44,871.00.",
            wrong=["833 checkouts failed across the six EU shops, worth EUR 44,871.00.",
                   "412 checkouts failed across the six EU shops, worth EUR 18,204.10.",
                   "1,047 checkouts failed across the six EU shops, worth EUR 12,915.60."])
    s.probe("entity_recall", "Which shop had the most failed checkouts, and how many?",
            [["Germany", "German"], ["412"]], [["eu-central", "eu central"], ["18,204", "18204"]],
            "The German shop had the most: 412 failed checkouts worth EUR 18,204.10.",
            wrong=["The French shop had the most: 287 failed checkouts worth EUR 12,915.60.",
                   "The Dutch shop had the most: 133 failed checkouts worth EUR 5,101.75.",
                   "The Italian shop had the most: 96 failed checkouts worth EUR 3,880.40."])
    s.probe("fact_retention", "After taking later successful retries into account, how many checkouts were actually lost?",
            [["833"]], [["214"], ["recovered", "later paid", "completed later"]],
            "214 were recovered by later retries, so 833 checkouts were actually lost.",
            wrong=["214 were recovered by later retries, so 1,047 checkouts were actually lost.",
                   "1,047 were recovered by later retries, so no checkouts were actually lost."])
    return s


def medium() -> Scenario:
    s = Scenario("aggregation-medium", "aggregation", "medium", "Monthly cloud spend per team against budgets")
    s.system(SYSTEM + " Cloud projects are labelled with an owning team; budgets are monthly, in USD.")
    s.user("Break down October's cloud bill by team. Which teams went over their budget, and by how much?")
    s.step("Listing projects and their owning teams.", "http_get", {"url": "http://finops.internal/api/projects"},
           {"projects": [{"id": "search-prod", "team": "search"}, {"id": "search-staging", "team": "search"},
                         {"id": "search-ml", "team": "search"}, {"id": "pay-prod", "team": "payments"},
                         {"id": "pay-sandbox", "team": "payments"}, {"id": "dwh", "team": "data"}, {"id": "etl", "team": "data"},
                         {"id": "notebooks", "team": "data"}, {"id": "web-prod", "team": "web"}, {"id": "web-preview", "team": "web"}]})
    s.step("Ten projects in four teams. Costs for the search projects.", "http_get",
           {"url": "http://finops.internal/api/costs?month=2026-10&projects=search-prod,search-staging,search-ml"},
           {"currency": "USD", "costs": [{"project": "search-prod", "total": 12480.55, "top_service": "compute"},
                                         {"project": "search-staging", "total": 2311.90, "top_service": "compute"},
                                         {"project": "search-ml", "total": 3112.67, "top_service": "gpu"}]})
    s.step("Search: 12,480.55 + 2,311.90 + 3,112.67 = 17,905.12 USD. Next, payments.", "http_get",
           {"url": "http://finops.internal/api/costs?month=2026-10&projects=pay-prod,pay-sandbox"},
           {"currency": "USD", "costs": [{"project": "pay-prod", "total": 9870.00, "top_service": "database"},
                                         {"project": "pay-sandbox", "total": 1204.33, "top_service": "compute"}]})
    s.step("Payments: 9,870.00 + 1,204.33 = 11,074.33 USD. Now the data team.", "http_get",
           {"url": "http://finops.internal/api/costs?month=2026-10&projects=dwh,etl,notebooks"},
           {"currency": "USD", "costs": [{"project": "dwh", "total": 8450.20, "top_service": "warehouse"},
                                         {"project": "etl", "total": 2980.75, "top_service": "compute"},
                                         {"project": "notebooks", "total": 1377.40, "top_service": "compute"}]})
    s.step("Data: 8,450.20 + 2,980.75 + 1,377.40 = 12,808.35 USD. Finally web.", "http_get",
           {"url": "http://finops.internal/api/costs?month=2026-10&projects=web-prod,web-preview"},
           {"currency": "USD", "costs": [{"project": "web-prod", "total": 5124.60, "top_service": "cdn"},
                                         {"project": "web-preview", "total": 1400.00, "top_service": "compute"}]})
    s.step("Web: 5,124.60 + 1,400.00 = 6,524.60 USD. Sum over all ten projects: 48,312.40 USD. Fetching the budgets.", "http_get",
           {"url": "http://finops.internal/api/budgets?month=2026-10"},
           {"currency": "USD", "budgets": {"search": 15000, "payments": 12000, "data": 14000, "web": 6000}})
    s.say("Against budget: search 17,905.12 vs 15,000 is over by 2,905.12; payments 11,074.33 vs 12,000 is under by 925.67; "
          "data 12,808.35 vs 14,000 is under by 1,191.65; web 6,524.60 vs 6,000 is over by 524.60. Two teams over budget.")
    s.step("Cross-checking the total with the provider's invoice.", "http_get",
           {"url": "http://finops.internal/api/invoices?month=2026-10"},
           {"invoice": "INV-CLD-2026-10", "currency": "USD", "amount_due": 48912.40, "status": "open",
            "lines": [{"desc": "usage", "amount": 48312.40}, {"desc": "Business support plan", "amount": 600.00}]})
    s.say("The invoice is 48,912.40 USD, 600.00 more than the project costs: the business support plan is billed at account level "
          "and not allocated to any project or team.")
    s.filler(7, seed=2610, ctx={"host": "finops.internal", "services": ["finops-api", "cost-exporter", "budget-alerts"],
                                "ns": "finops", "db": "finops_ro", "repo": "finops"},
             first_text="Before reporting I'll make sure the cost exporter data is complete.")
    s.step("Checking whether budget alerts fired this month.", "http_get",
           {"url": "http://finops.internal/budget-alerts/api/alerts?month=2026-10"},
           {"alerts": [], "note": "alerting paused 2026-09-28 for migration to new notifier"})
    s.say("No alerts fired because budget alerting has been paused since 28 September; worth re-enabling along with the report.")
    s.probe("fact_retention", "What was the total cloud cost across all projects in October?",
            [["48,312.40", "48312.40", "48,312.4", "48312.4", "48,312", "48312"]], [["ten projects", "10 projects"], "USD"],
            "The ten projects cost 48,312.40 USD in total in October.",
            wrong=["The ten projects cost 48,912.40 USD in total in October.",
                   "The ten projects cost 17,905.12 USD in total in October.",
                   "The ten projects cost 12,808.35 USD in total in October."])
    s.probe("entity_recall", "Which teams exceeded their budget, and by how much?",
            [["2,905.12", "2905.12", "2,905", "2905"], ["524.60", "524.6", "524"]], ["search", "web"],
            "Search exceeded its 15,000 USD budget by 2,905.12 USD and web exceeded its 6,000 USD budget by 524.60 USD.",
            wrong=["Payments exceeded its 12,000 USD budget by 925.67 USD and data exceeded its 14,000 USD budget by 1,191.65 "
                    "USD.",
                   "Search exceeded its 15,000 USD budget by 2,905.12 USD; every other team stayed within its budget.",
                   "Only the data team exceeded its 14,000 USD budget, by 1,191.65 USD; search and web stayed within theirs."])
    s.probe("contradiction_awareness", "Does the provider's invoice agree with the sum of project costs? Explain any difference.",
            [["48,912.40", "48912.40", "48,912.4", "48912.4", "48,912", "48912"], ["support"]], [["600", "600.00"], ["48,312", "48312"]],
            "No: the invoice is 48,912.40 USD while the projects sum to 48,312.40 USD; the 600.00 USD difference is the business "
            "support plan, billed at account level and not allocated to any project.",
            wrong=["Yes: the invoice is 48,312.40 USD, exactly the sum of the project costs; the business support plan is "
                    "already included in the projects, so nothing is left unallocated.",
                   "No: the invoice is 48,912.40 USD while the projects sum to 48,312.40 USD; the 600.00 USD difference is "
                    "usage of the web-preview project that the cost exporter missed."])
    return s


def long() -> Scenario:
    s = Scenario("aggregation-long", "aggregation", "long", "Counting 5xx errors per region and service during an incident")
    s.system(SYSTEM + " The incident INC-3307 ran from 10:00 to 10:45 UTC on 2026-11-08. Logs are in the central log store.")
    s.user("For the INC-3307 post-mortem I need the number of 5xx responses per region and in total, how many customers "
           "were affected, and when the errors peaked.")
    q = "SELECT count(*) FROM http_logs WHERE status >= 500 AND ts BETWEEN '2026-11-08 10:00' AND '2026-11-08 10:45'"
    s.step("Starting with eu-west, gateway.", "sql_query", {"db": "logs", "query": q + " AND region='eu-west' AND service='gateway'"},
           {"columns": ["count"], "rows": [[1204]], "elapsed_ms": 812})
    s.step("eu-west gateway: 1,204. Now eu-west auth.", "sql_query", {"db": "logs", "query": q + " AND region='eu-west' AND service='auth'"},
           {"columns": ["count"], "rows": [[311]], "elapsed_ms": 640})
    s.step("eu-west auth: 311, so eu-west totals 1,515. Next us-east gateway.", "sql_query",
           {"db": "logs", "query": q + " AND region='us-east' AND service='gateway'"},
           {"columns": ["count"], "rows": [[3877]], "elapsed_ms": 1533})
    s.step("us-east gateway: 3,877. us-east auth.", "sql_query", {"db": "logs", "query": q + " AND region='us-east' AND service='auth'"},
           {"columns": ["count"], "rows": [[902]], "elapsed_ms": 1102})
    s.step("us-east totals 4,779. Now ap-south gateway.", "sql_query",
           {"db": "logs", "query": q + " AND region='ap-south' AND service='gateway'"},
           {"columns": ["count"], "rows": [[96]], "elapsed_ms": 301})
    s.step("ap-south gateway: 96. ap-south auth.", "sql_query", {"db": "logs", "query": q + " AND region='ap-south' AND service='auth'"},
           {"columns": ["count"], "rows": [[14]], "elapsed_ms": 288})
    s.step("ap-south totals 110. Overall: 1,515 + 4,779 + 110 = 6,404 responses with status 5xx, us-east the largest share. "
           "Counting distinct affected customers.", "sql_query",
           {"db": "logs", "query": "SELECT count(DISTINCT customer_id) FROM http_logs WHERE status >= 500 AND ts BETWEEN '2026-11-08 10:00' AND '2026-11-08 10:45'"},
           {"columns": ["count"], "rows": [[38]], "elapsed_ms": 2210})
    s.step("38 distinct customers. Now the per-minute histogram to find the peak.", "sql_query",
           {"db": "logs", "query": "SELECT date_trunc('minute', ts) m, count(*) FROM http_logs WHERE status >= 500 AND ts BETWEEN '2026-11-08 10:00' AND '2026-11-08 10:45' GROUP BY m ORDER BY count DESC LIMIT 3"},
           {"columns": ["m", "count"], "rows": [["2026-11-08 10:17", 612], ["2026-11-08 10:18", 577], ["2026-11-08 10:16", 431]]})
    s.step("Peak at 10:17 UTC with 612 errors in that minute. Checking what the public status page said.", "http_get",
           {"url": "http://status.internal/api/incidents/INC-3307"},
           {"id": "INC-3307", "public_message": "Elevated error rates affected customers in eu-west only. Other regions were not impacted.",
            "posted": "2026-11-08T10:31Z"})
    s.say("The status page contradicts the logs: it says only eu-west was affected, but us-east produced most of the errors "
          "(4,779 of 6,404) and ap-south had some too. The post-mortem must correct that. I'll still check the other "
          "systems for anything that changes the numbers.")
    s.filler(25, seed=3307, ctx={"host": "logs.internal", "services": ["gateway", "auth", "log-ingest"],
                                 "ns": "edge", "db": "logs", "repo": "edge-config"},
             first_text="First, whether log ingestion dropped anything during the window.")
    s.step("Last, the retention setting, so the raw data is still there for the post-mortem review.", "read_file",
           {"path": "/etc/log-store/retention.yaml"}, "http_logs:\n  hot_days: 14\n  cold_days: 180")
    s.say("Raw logs stay hot for 14 days, so the review can re-run any of these queries if needed.")
    s.probe("fact_retention", "How many 5xx responses were there in total during the incident, and how many customers were affected?",
            [["6,404", "6404", "6 404"], ["38 customers", "38 distinct", "38 affected", "38 unique", "thirty-eight"]], [["4,779", "4779"], ["1,515", "1515"]],
            "There were 6,404 5xx responses in total (eu-west 1,515, us-east 4,779, ap-south 110), affecting 38 distinct customers.",
            wrong=["There were 4,779 5xx responses in total (eu-west 1,515, us-east 3,877, ap-south 96), affecting 38 "
                    "distinct customers.",
                   "There were 6,404 5xx responses in total (eu-west 1,515, us-east 4,779, ap-south 110), affecting 612 "
                    "distinct customers.",
                   "There were 1,515 5xx responses in total, all in eu-west (gateway 1,204, auth 311), affecting 38 distinct "
                    "customers."])
    s.probe("contradiction_awareness", "What did the public status page claim about the affected regions, and what do the logs show?",
            [["eu-west only", "only eu-west", "only in eu-west", "limited to eu-west", "only affected eu-west", "eu-west was affected"],
             ["us-east"]], [["4,779", "4779"], ["ap-south"], ["most", "majority", "largest"]],
            "The status page said only eu-west was affected, but the logs show us-east had the most errors (4,779 of 6,404) and "
            "ap-south was affected too.",
            wrong=["The status page said us-east and eu-west were affected, and the logs agree: us-east had the most errors "
                    "(4,779 of 6,404).",
                   "The status page said only eu-west was affected, and the logs agree: eu-west had every 5xx error (1,515) "
                    "while the other regions stayed clean."])
    s.probe("temporal_ordering", "At what minute did the errors peak, and how many errors were logged in that minute?",
            [["10:17"], ["612"]], [["10:18", "577"], ["10:16", "431"]],
            "The errors peaked at 10:17 UTC with 612 errors in that minute (10:18 had 577, 10:16 had 431).",
            wrong=["The errors peaked at 10:18 UTC with 577 errors in that minute (10:16 had 431, 10:00 had the first ones).",
                   "The errors peaked at 10:31 UTC with 612 errors in that minute, when the status page message was posted.",
                   "The errors peaked at 10:00 UTC with 1,204 errors in that minute, at the start of the incident window."])
    return s


def build():
    return [short(), medium(), long()]
