"""multi_hop: A -> B -> C lookups where the answer needs the chain."""

from mfscen import Scenario

SYSTEM = ("You are an SRE assistant. Tools: http_get(url), sql_query(db, query), run_shell(cmd), read_file(path), "
          "list_dir(path), grep_logs(pattern, path, since). Follow each lead to its source and report only what the tools show.")


def short() -> Scenario:
    s = Scenario("multi_hop-short", "multi_hop", "short", "Who owns what is filling the disk of a database replica")
    s.system(SYSTEM)
    s.user("The root disk on db-replica-3 is at 94% and climbing. Who owns whatever is filling it, and why is it happening?")
    s.step("Finding the largest directories first.", "run_shell",
           {"cmd": "ssh db-replica-3 'du -xh --max-depth=3 /var/lib | sort -rh | head -4'"},
           "41G\t/var/lib/spool/ingest-bridge\n38G\t/var/lib/postgresql/16/main\n1.2G\t/var/lib/apt\n310M\t/var/lib/dpkg")
    s.step("/var/lib/spool/ingest-bridge holds 41G, more than the database itself. Which unit writes there?", "run_shell",
           {"cmd": "ssh db-replica-3 'systemctl status ingest-bridge --no-pager | head -3; journalctl -u ingest-bridge --since -2d | grep -m3 -i spool'"},
           "ingest-bridge.service - CDC bridge from Postgres to Kafka\n   Active: active (running) since 2026-07-01 06:10:12 UTC\n"
           "Jul 02 23:41:07 spooling locally: broker rejected produce (SASL authentication failed for user cdc-replica3)\n"
           "Jul 02 23:41:07 spool will retry every 60 s, no size limit configured")
    s.step("Confirming the rejection on the Kafka side.", "grep_logs",
           {"pattern": "cdc-replica3", "path": "/var/log/kafka/server.log", "since": "2d"},
           "[2026-07-02 23:41:06,912] INFO [SocketServer listenerType=ZK_BROKER, nodeId=2] Failed authentication with /10.30.2.17 "
           "(channelId=10.30.1.5:9094-10.30.2.17:51544-0) (Authentication failed: Invalid username or password)\n"
           "[2026-07-03 08:12:44,105] INFO ... Failed authentication with /10.30.2.17 (repeated 36,118 times since last report)")
    s.step("So the bridge cannot authenticate to Kafka and buffers everything on disk without a cap. "
           "Looking the unit up in the service catalog.", "http_get",
           {"url": "http://catalog.internal/api/components/ingest-bridge"},
           {"component": "ingest-bridge", "owner_team": "Harbor", "on_call": "Priya Raman", "slack": "#harbor-data",
            "depends_on": ["kafka-main"], "notes": "credentials for cdc-* users are rotated by vault job kafka-cred-rotate"})
    s.step("Checking whether that rotation job ran around the time spooling began.", "http_get",
           {"url": "http://vault.internal/api/jobs/kafka-cred-rotate/runs?limit=1"},
           {"runs": [{"started": "2026-07-02T23:38:55Z", "status": "succeeded", "rotated": ["cdc-replica1", "cdc-replica2", "cdc-replica3"],
                      "consumers_notified": ["cdc-replica1", "cdc-replica2"]}]})
    s.step("Let me see if anyone has opened a ticket for this yet.", "http_get",
           {"url": "http://tickets.local/api/search?q=db-replica-3+disk"}, {"total": 0, "items": []})
    s.probe("entity_recall", "Which team owns the component that is filling the disk, and who is on call for it?",
            ["Harbor", ["Priya Raman", "Priya", "Raman"]], [["ingest-bridge", "ingest bridge"], "#harbor-data"],
            "The component is ingest-bridge, owned by team Harbor; Priya Raman is on call.",
            wrong=["The component is kafka-main, owned by team Vault; cdc-replica3 is on call.",
                   "The component is ingest-bridge, owned by team Harbor; cdc-replica3 is on call.",
                   "The component is kafka-cred-rotate, owned by team Vault; Priya Raman is on call."])
    s.probe("causal_fidelity", "What chain of events makes the disk fill up?",
            [["SASL", "authentication failed", "auth"], ["rotat"]], [["spool", "buffer"], ["notified", "cdc-replica3"], ["no size limit", "no limit"]],
            "The vault job kafka-cred-rotate rotated the cdc-replica3 credentials but did not notify this bridge, so Kafka rejects it "
            "(SASL authentication failed) and ingest-bridge spools everything locally with no size limit.",
            wrong=["The Postgres data directory grew to 38G because the CDC bridge stopped consuming its changes, and the "
                    "database keeps its WAL with no size limit until the bridge catches up again.",
                   "Kafka broker nodeId 2 went down on 2026-07-02, so ingest-bridge spools everything locally and retries "
                    "every 60 s with no size limit until the broker is back.",
                   "The vault job kafka-cred-rotate rotated the cdc-replica3 credentials and notified this bridge, but "
                    "Kafka's disk is full, so ingest-bridge spools everything locally with no size limit."])
    s.probe("temporal_ordering", "When did the credential rotation run, and when did local spooling start?",
            [["23:38"], ["23:41"]], [["2026-07-02", "Jul 02", "July 2"], "kafka-cred-rotate"],
            "The rotation started at 23:38:55 UTC on 2026-07-02 and spooling started at 23:41:07, about two minutes later.",
            wrong=["The rotation started at 23:41:06 UTC on 2026-07-02 and spooling started at 08:12:44 on 2026-07-03, hours "
                    "later.",
                   "The rotation started at 06:10:12 UTC on 2026-07-01 and spooling started at 23:41:07 on 2026-07-02, a day "
                    "later.",
                   "The rotation started at 23:38:55 UTC on 2026-07-02 and spooling started at 08:12:44 on 2026-07-03, the "
                    "next morning."])
    return s


def medium() -> Scenario:
    s = Scenario("multi_hop-medium", "multi_hop", "medium", "Revenue dashboard shows zero: trace the panel back to the failing job")
    s.system(SYSTEM + " The data stack: Airflow for loads, dbt for models, a Postgres warehouse, Grafana dashboards.")
    s.user("The finance dashboard shows zero revenue for yesterday, 2026-04-03, but orders clearly came in. Trace where the "
           "numbers are lost.")
    s.step("Starting from the dashboard definition.", "http_get",
           {"url": "http://grafana.internal/api/dashboards/uid/fin-rev"},
           {"title": "Finance / Revenue", "panels": [{"title": "Daily revenue", "datasource": "warehouse",
             "rawSql": "SELECT day, revenue_eur FROM mart.daily_revenue WHERE day >= now() - interval '30 days'"},
             {"title": "Refund rate", "datasource": "warehouse", "rawSql": "SELECT day, refund_rate FROM mart.refunds_daily"}]})
    s.step("The panel reads mart.daily_revenue. Querying it for the day.", "sql_query",
           {"db": "warehouse", "query": "SELECT day, revenue_eur, order_count FROM mart.daily_revenue WHERE day BETWEEN '2026-04-01' AND '2026-04-03'"},
           {"columns": ["day", "revenue_eur", "order_count"],
            "rows": [["2026-04-01", 61240.18, 1893], ["2026-04-02", 59877.02, 1840], ["2026-04-03", 0, 0]]})
    s.step("Zero orders, so the problem is upstream of the mart. Finding which dbt model builds it.", "read_file",
           {"path": "/srv/dbt/models/mart/daily_revenue.sql"},
           "{{ config(materialized='table') }}\nselect order_date as day,\n       sum(amount_eur) as revenue_eur,\n"
           "       count(*) as order_count\nfrom {{ ref('stg_orders') }}\nwhere status <> 'cancelled'\ngroup by 1")
    s.step("It is built from stg_orders. Checking that staging table for the day.", "sql_query",
           {"db": "warehouse", "query": "SELECT count(*), max(_loaded_at) FROM staging.stg_orders WHERE order_date = '2026-04-03'"},
           {"columns": ["count", "max"], "rows": [[0, None]]})
    s.step("Nothing was loaded into stg_orders for the 3rd. Its source is raw.orders; let me see who loads that.", "grep_logs",
           {"pattern": "raw.orders", "path": "/srv/airflow/dags/*.py", "since": "all"},
           "dags/orders_ingest.py:14:    target_table = 'raw.orders'\n"
           "dags/orders_ingest.py:22:    extract = S3ToPostgresOperator(task_id='extract_orders', s3_key='exports/orders-{{ ds }}.csv.gz', ...)")
    s.step("The DAG orders_ingest, task extract_orders, loads it from S3. Checking that task's last runs.", "http_get",
           {"url": "http://airflow.internal/api/v1/dags/orders_ingest/dagRuns?limit=2"},
           {"dag_runs": [{"run_id": "scheduled__2026-04-03", "state": "failed", "end": "2026-04-04T01:17:40Z"},
                         {"run_id": "scheduled__2026-04-02", "state": "success", "end": "2026-04-03T01:09:12Z"}]})
    s.step("Fetching the log of the failed extract_orders attempt.", "http_get",
           {"url": "http://airflow.internal/api/v1/dags/orders_ingest/dagRuns/scheduled__2026-04-03/taskInstances/extract_orders/logs/3"},
           "[2026-04-04 01:17:38] INFO looking for s3://acme-exports/exports/orders-2026-04-03.csv.gz\n"
           "[2026-04-04 01:17:39] ERROR botocore.exceptions.ClientError: An error occurred (404) when calling the HeadObject operation: Not Found\n"
           "[2026-04-04 01:17:40] ERROR Task failed after 3 retries")
    s.step("The expected file is missing. Listing what the export actually wrote.", "run_shell",
           {"cmd": "aws s3 ls s3://acme-exports/exports/ | tail -3"},
           "2026-04-02 00:41:12    4120551 orders-2026-04-01.csv.gz\n2026-04-03 00:40:57    4081930 orders-2026-04-02.csv.gz\n"
           "2026-04-04 00:43:05    4197702 orders_2026-04-03.csv.gz")
    s.step("The file exists, but named with an underscore instead of a hyphen. Checking what changed in the exporter.", "http_get",
           {"url": "http://deploy.internal/api/releases?app=order-exporter&limit=2"},
           {"releases": [{"version": "v2.14.0", "at": "2026-04-03T15:22Z", "author": "e.santos",
                          "notes": "unify artefact naming: <dataset>_<date>.<ext> across exports"},
                         {"version": "v2.13.4", "at": "2026-03-28T10:05Z", "notes": "retry S3 multipart uploads"}]})
    s.say("That closes the chain: the exporter's v2.14.0 release renamed the file, the loader still expects the old name and fails, "
          "so stg_orders and the mart stay empty for the day.")
    s.filler(5, seed=414, ctx={"host": "airflow.internal", "services": ["airflow-scheduler", "dbt-runner", "warehouse-proxy"],
                               "ns": "data", "db": "warehouse", "repo": "data-platform"},
             first_text="Before proposing a fix I'll check nothing else in the stack is unhealthy.")
    s.step("One more look at whether other DAGs read the same export prefix.", "grep_logs",
           {"pattern": "acme-exports/exports", "path": "/srv/airflow/dags/*.py", "since": "all"},
           "dags/fraud_features.py:31:    src = S3KeySensor(task_id='wait_export', bucket_key='exports/orders-{{ ds }}.csv.gz')")
    s.say("A second DAG, fraud_features, reads from the same prefix and may be affected too; I'd include it in the fix.")
    s.probe("fact_retention", "Which table does the revenue panel read, and which upstream dbt model feeds that table?",
            [["mart.daily_revenue", "daily_revenue"], ["stg_orders"]], [["raw.orders"], ["orders_ingest"]],
            "The panel reads mart.daily_revenue, which dbt builds from stg_orders (loaded from raw.orders).",
            wrong=["The panel reads mart.refunds_daily, which dbt builds from stg_orders (loaded from raw.orders).",
                   "The panel reads mart.daily_revenue, which dbt builds from raw.orders (loaded by fraud_features).",
                   "The panel reads raw.orders, which dbt builds from orders_ingest (loaded from the S3 exports)."])
    s.probe("entity_recall", "Which Airflow DAG and task failed to load the data?",
            [["orders_ingest"], ["extract_orders"]], [["HeadObject", "missing file", "file not found", "file was missing"], ["S3ToPostgres", "from S3", "S3 file", "S3 key"]],
            "The DAG orders_ingest, task extract_orders, failed with an S3 404 Not Found.",
            wrong=["The DAG fraud_features, task wait_export, failed with an S3 404 Not Found.",
                   "The DAG orders_ingest, task wait_export, failed with an S3 404 Not Found.",
                   "The DAG daily_revenue, task extract_orders, failed with an S3 404 Not Found."])
    s.probe("causal_fidelity", "Why could the loader not find its input file?",
            [["underscore", "orders_2026-04-03"], ["v2.14", "2.14"]], [["hyphen", "orders-2026-04-03"], ["naming", "renamed", "rename"], "order-exporter"],
            "The order-exporter release v2.14.0 changed the naming to <dataset>_<date>, so it wrote orders_2026-04-03.csv.gz "
            "(underscore) while the loader looks for orders-2026-04-03.csv.gz (hyphen).",
            wrong=["The order-exporter release v2.13.4 changed multipart uploads, so it never wrote orders-2026-04-03.csv.gz "
                    "and the loader found no file at all for that day.",
                   "The order-exporter release v2.14.0 moved the exports to a new bucket, so it wrote "
                    "orders-2026-04-03.csv.gz outside s3://acme-exports while the loader looks in the old prefix.",
                   "The order-exporter ran late, at 00:43 on 2026-04-04, so orders-2026-04-03.csv.gz (hyphen) did not exist "
                    "yet when the loader looked for it at 01:17."])
    return s


def long() -> Scenario:
    s = Scenario("multi_hop-long", "multi_hop", "long", "Complaint ticket to order to shipment to warehouse stock")
    s.system(SYSTEM + " Systems: helpdesk API, order service, shipment service, warehouse management system (WMS).")
    s.user("Customer complaint T-88213 says the order never shipped, nine days after purchase. Work out what happened to it.")
    s.step("Reading the complaint.", "http_get", {"url": "http://helpdesk.internal/api/tickets/T-88213"},
           {"id": "T-88213", "customer": "c_20417 (Mirela Popescu)", "subject": "Where is my lamp?",
            "linked_order": "ORD-5521907", "created": "2026-08-21T09:14Z", "channel": "email"})
    s.step("Linked order ORD-5521907. Fetching it.", "http_get", {"url": "http://orders.internal/api/orders/ORD-5521907"},
           {"id": "ORD-5521907", "placed": "2026-08-12T19:03Z", "status": "awaiting_shipment", "paid": True,
            "lines": [{"sku": "LMP-4410-BLK", "name": "Arc floor lamp, black", "qty": 1, "price_eur": 189.0}],
            "shipment": "SHP-20931"})
    s.step("Paid, still awaiting shipment. Following the shipment record.", "http_get",
           {"url": "http://shipments.internal/api/shipments/SHP-20931"},
           {"id": "SHP-20931", "warehouse": "NL-TLB2", "warehouse_name": "Tilburg 2", "state": "pick_on_hold",
            "hold_reason": "SHORT_PICK", "carrier": "PostNL", "label": None})
    s.step("Shipment SHP-20931 sits on hold in warehouse NL-TLB2 with a short pick. Asking the WMS about the SKU there.", "http_get",
           {"url": "http://wms.internal/api/warehouses/NL-TLB2/stock/LMP-4410-BLK"},
           {"sku": "LMP-4410-BLK", "on_hand": 0, "allocated": 7, "bin": "C-14-03",
            "last_adjustment": {"at": "2026-08-14T06:52Z", "type": "cycle_count", "delta": -23, "by": "k.dewit",
                                "note": "bin C-14-03 counted empty"}})
    s.step("A cycle count on 2026-08-14 zeroed the stock, two days after the order. Checking receiving for that SKU.", "http_get",
           {"url": "http://wms.internal/api/warehouses/NL-TLB2/receipts?sku=LMP-4410-BLK&since=2026-08-01"},
           {"receipts": [{"po": "PO-77412", "received": "2026-08-13T15:40Z", "qty": 24, "putaway_bin": "C-41-03",
                          "putaway_by": "scanner-118"}]})
    s.say("That explains the chain: 24 units were received on the 13th but put away in bin C-41-03 instead of C-14-03. "
          "The next morning's cycle count found C-14-03 empty and wrote the stock down to zero, so all 7 orders on the SKU, "
          "this one included, are held as short picks. I'll check the rest of the fulfilment path before suggesting a fix.")
    s.filler(28, seed=88213, ctx={"host": "wms.internal", "services": ["wms-api", "shipment-svc", "order-svc"],
                                  "ns": "fulfilment", "db": "wms_ro", "repo": "fulfilment"},
             first_text="Starting with the services involved.")
    s.step("Finally, the carrier's pickup schedule for the warehouse.", "http_get",
           {"url": "http://shipments.internal/api/carriers/postnl/pickups?warehouse=NL-TLB2&days=2"},
           {"pickups": [{"date": "2026-08-22", "cutoff": "16:00"}, {"date": "2026-08-23", "cutoff": "12:00"}]})
    s.say("Pickups run daily, so once the stock is corrected the shipment can leave with the next pickup.")
    s.probe("fact_retention", "What is the order number behind the complaint, and what shipment id belongs to it?",
            [["ORD-5521907", "5521907"], ["SHP-20931", "20931"]], [["LMP-4410", "floor lamp"], "awaiting"],
            "The complaint is about order ORD-5521907, shipment SHP-20931.",
            wrong=["The complaint is about order PO-77412, shipment SHP-20931.",
                   "The complaint is about order ORD-5521907, shipment T-88213.",
                   "The complaint is about order c_20417, shipment PO-77412."])
    s.probe("entity_recall", "In which warehouse is the shipment stuck, and which product is it waiting for?",
            [["NL-TLB2", "Tilburg"], ["LMP-4410-BLK", "LMP-4410"]], [["floor lamp", "arc lamp"], ["pick_on_hold", "short pick", "SHORT_PICK"]],
            "It is held in warehouse NL-TLB2 (Tilburg 2), waiting for SKU LMP-4410-BLK, the black arc floor lamp.",
            wrong=["It is held by the carrier PostNL (pickup), waiting for SKU LMP-4410-BLK, the black arc floor lamp.",
                   "It is held in warehouse NL-TLB2 (Tilburg 2), waiting for PO-77412, a delivery of 24 floor lamps.",
                   "It is held in warehouse NL-TLB2 (Tilburg 2), waiting for order ORD-5521907 to be paid."])
    s.probe("causal_fidelity", "Why does the warehouse believe it has none of that product?",
            [["cycle count"], ["C-41-03", "wrong bin", "misplaced", "put away"]], [["C-14-03"], ["dewit"], ["PO-77412", "24 units"]],
            "The 24 units received on 2026-08-13 (PO-77412) were put away in bin C-41-03 instead of C-14-03, so the cycle count "
            "by k.dewit on 2026-08-14 found C-14-03 empty and wrote stock down to zero.",
            wrong=["The 24 units of PO-77412 never arrived at the warehouse, so the cycle count by k.dewit on 2026-08-14 "
                    "found C-14-03 empty and wrote stock down to zero.",
                   "The 7 allocated units were shipped to other customers on 2026-08-13, so the on-hand stock in bin C-14-03 "
                    "dropped to zero before this order could be picked.",
                   "The cycle count by k.dewit on 2026-08-14 found 23 damaged units in C-14-03 and wrote them off, so none "
                    "were left for this order."])
    return s


def build():
    return [short(), medium(), long()]
