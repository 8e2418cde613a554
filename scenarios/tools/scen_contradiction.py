"""contradiction: two sources disagree; the probes ask about both."""

from mfscen import Scenario

SYSTEM = ("You are an infrastructure assistant. Tools: http_get(url), sql_query(db, query), run_shell(cmd), read_file(path), "
          "grep_logs(pattern, path, since). When sources disagree, say so and keep both findings.")


def short() -> Scenario:
    s = Scenario("contradiction-short", "contradiction", "short", "Is the backup server's second disk healthy?")
    s.system(SYSTEM)
    s.user("Nightly backups on backup-01 got slow. Is its data disk healthy, or should we order a replacement?")
    s.step("Reading the SMART status of the data disk.", "run_shell", {"cmd": "ssh backup-01 sudo smartctl -H -A /dev/sdb"},
           "SMART overall-health self-assessment test result: PASSED\n"
           "  5 Reallocated_Sector_Ct   0x0033   100   100   010    Pre-fail  Always       -       0\n"
           "  9 Power_On_Hours          0x0032   071   071   000    Old_age   Always       -       25731\n"
           "194 Temperature_Celsius     0x0022   038   049   000    Old_age   Always       -       38\n"
           "197 Current_Pending_Sector  0x0012   100   100   000    Old_age   Always       -       0\n"
           "198 Offline_Uncorrectable   0x0010   100   100   000    Old_age   Offline      -       0")
    s.step("SMART says PASSED with no reallocated or pending sectors. Checking the kernel log as well.", "run_shell",
           {"cmd": "ssh backup-01 'journalctl -k --since -3d | grep -i sdb | tail -3'"},
           "Dec 01 02:14:51 backup-01 kernel: blk_update_request: I/O error, dev sdb, sector 1953519616 op 0x0:(READ)\n"
           "Dec 01 02:14:51 backup-01 kernel: sd 2:0:1:0: [sdb] tag#17 Sense Key : Medium Error [current]\n"
           "Dec 02 02:09:13 backup-01 kernel: blk_update_request: I/O error, dev sdb, sector 1953519624 op 0x0:(READ)")
    s.step("The kernel reports repeated read I/O errors with a Medium Error on sdb, which contradicts the SMART verdict. "
           "Looking at the monitoring view too.", "http_get", {"url": "http://monitor.internal/api/hosts/backup-01/disks/sdb"},
           {"disk": "sdb", "model": "ST8000NM000A", "smart": "PASSED", "io_errors_24h": 0, "source": "smart-exporter, polled hourly"})
    s.step("Monitoring only relays the SMART flag, so it shows 0 errors. Checking how the backup durations developed.", "http_get",
           {"url": "http://backup.internal/api/jobs?host=backup-01&limit=4"},
           {"jobs": [{"date": "2026-12-02", "duration_min": 287, "read_retries": 1184}, {"date": "2026-12-01", "duration_min": 264, "read_retries": 1031},
                     {"date": "2026-11-30", "duration_min": 96, "read_retries": 0}, {"date": "2026-11-29", "duration_min": 93, "read_retries": 0}]})
    s.step("Durations tripled once the read retries began. Checking the warranty for a possible swap.", "http_get",
           {"url": "http://assets.internal/api/assets?host=backup-01&component=sdb"},
           {"asset": "HW-55120", "warranty_until": "2027-04-30", "vendor_contract": "NBD-replacement"})
    s.probe("contradiction_awareness", "What did SMART say about the data disk, and what did the kernel log show?",
            [["PASSED", "passes"], ["I/O error", "i/o errors", "Medium Error"]], [["sdb"], ["1953519616", "sector"]],
            "SMART reports PASSED with no reallocated or pending sectors, but the kernel log shows repeated read I/O errors "
            "(Medium Error) on sdb.",
            wrong=["SMART reports FAILED with 25731 reallocated sectors, and the kernel log agrees, showing repeated read I/O "
                    "errors (Medium Error) on sdb.",
                   "SMART reports PASSED with no reallocated or pending sectors, and the kernel log agrees, showing no errors "
                    "on sdb since the last boot."])
    s.probe("contradiction_awareness", "Why does the monitoring dashboard show no problem with the disk?",
            [["smart-exporter", "only relays", "SMART flag", "relays smart", "from smart"]], [["io_errors_24h", "0 errors"], "hourly"],
            "The dashboard takes its data from smart-exporter (polled hourly), which only relays the SMART flag, so it shows "
            "PASSED and 0 I/O errors despite the kernel errors.",
            wrong=["The dashboard reads the kernel log (polled hourly), and the I/O errors had been rotated out of it, so it "
                    "shows no errors for sdb.",
                   "The dashboard only tracks the disk model ST8000NM000A and its warranty until 2027-04-30 (HW-55120), so it "
                    "shows no problem with sdb.",
                   "The dashboard counts only the backup jobs' read retries, which were 0 on 2026-11-30, so it shows 0 I/O "
                    "errors for the disk."])
    s.probe("fact_retention", "At which sectors did the read errors occur?",
            [["1953519616"], ["1953519624"]], [["Dec 01", "Dec 1", "December 1"], ["Dec 02", "Dec 2", "December 2"]],
            "Read I/O errors occurred at sectors 1953519616 (Dec 01 02:14) and 1953519624 (Dec 02 02:09).",
            wrong=["Read I/O errors occurred at sectors 1031 (Dec 01 02:14) and 1184 (Dec 02 02:09).",
                   "Read I/O errors occurred only at sector 1953519616, on Dec 01 at 02:14 and again on Dec 02 at 02:09.",
                   "Read I/O errors occurred at sectors 25731 (Dec 01 02:14) and 1953519616 (Dec 02 02:09)."])
    return s


def medium() -> Scenario:
    s = Scenario("contradiction-medium", "contradiction", "medium", "Deploy API and live pods disagree on the running version")
    s.system(SYSTEM + " payments-api runs on Kubernetes in namespace payments; deploys go through the deploy API.")
    s.user("A bug fixed in payments-api 3.8.2 still shows up for some customers. Is 3.8.2 really what is running everywhere?")
    s.step("Checking what the deploy API reports.", "http_get",
           {"url": "http://deploy.internal/api/apps/payments-api/status"},
           {"app": "payments-api", "version": "3.8.2", "image": "registry.internal/payments-api:3.8.2", "replicas": 6,
            "updated_replicas": 6, "state": "healthy", "deployed_at": "2026-03-14T10:02Z"})
    s.step("The deploy API claims all 6 replicas run 3.8.2. Asking each pod directly.", "run_shell",
           {"cmd": "for p in $(kubectl -n payments get pods -l app=payments-api -o name); do echo $p $(kubectl -n payments exec $p -- curl -s localhost:8080/version); done"},
           "pod/payments-api-6b7c9d-4kq2m {\"version\":\"3.8.2\"}\npod/payments-api-6b7c9d-8zt5w {\"version\":\"3.8.2\"}\n"
           "pod/payments-api-6b7c9d-c91rx {\"version\":\"3.8.2\"}\npod/payments-api-6b7c9d-jm4fp {\"version\":\"3.8.2\"}\n"
           "pod/payments-api-6b7c9d-w0hd3 {\"version\":\"3.8.2\"}\npod/payments-api-5f48b1-tq7nn {\"version\":\"3.7.9\"}")
    s.step("One pod, payments-api-5f48b1-tq7nn, answers 3.7.9, contradicting the deploy API. It has a different hash prefix, "
           "so it belongs to another ReplicaSet.", "run_shell",
           {"cmd": "kubectl -n payments get rs -l app=payments-api -o custom-columns=NAME:.metadata.name,DESIRED:.spec.replicas,READY:.status.readyReplicas,IMAGE:.spec.template.spec.containers[0].image"},
           "NAME                    DESIRED   READY   IMAGE\npayments-api-6b7c9d      5         5       registry.internal/payments-api:3.8.2\n"
           "payments-api-5f48b1      1         1       registry.internal/payments-api:3.7.9")
    s.step("The old ReplicaSet still wants 1 replica. Checking why the rollout left it behind.", "run_shell",
           {"cmd": "kubectl -n payments describe deploy payments-api | grep -A3 -i -e conditions -e 'rollout'"},
           "Conditions:\n  Progressing  False  ProgressDeadlineExceeded\n"
           "Events:  Warning  FailedEviction  pod payments-api-5f48b1-tq7nn: Cannot evict pod as it would violate the pod's disruption budget (payments-pdb minAvailable=6)")
    s.say("So the rollout stalled: the PodDisruptionBudget payments-pdb requires 6 available pods, equal to the replica count, "
          "so the last old pod can never be evicted. The deploy API counts desired replicas of the new template and reports 6/6 anyway.")
    s.step("Checking how much traffic that old pod serves.", "http_get",
           {"url": "http://prometheus.payments:9090/api/v1/query?query=sum by (pod) (rate(http_requests_total{app=\"payments-api\"}[10m]))"},
           {"status": "success", "data": {"result": [{"metric": {"pod": "payments-api-5f48b1-tq7nn"}, "value": [0, "41.2"]},
                                                     {"metric": {"pod": "payments-api-6b7c9d-4kq2m"}, "value": [0, "40.8"]}]}})
    s.say("About one sixth of requests still hit the old build, which matches 'some customers'.")
    s.filler(8, seed=382, ctx={"host": "deploy.internal", "services": ["payments-api", "ledger", "fraud-score"],
                               "ns": "payments", "db": "payments_ro", "repo": "payments"},
             first_text="I'll check the neighbouring services for similar stuck rollouts.")
    s.step("Checking when the PDB was last changed.", "run_shell",
           {"cmd": "git -C /src/payments-k8s log -1 --format='%h %an %ad %s' -- pdb.yaml"},
           "a81c0e2 r.bianchi Thu Mar 12 16:40 2026 raise minAvailable for black-friday drill")
    s.say("The budget was raised two days before the deploy for a load drill and never reverted.")
    s.probe("contradiction_awareness", "What does the deploy API report, and what do the pods themselves answer?",
            [["6/6", "all 6", "all six", "6 replicas", "six replicas", "updated_replicas"], ["3.7.9"]], [["healthy"], ["one pod", "1 pod", "a single pod", "one of"]],
            "The deploy API reports 3.8.2 on all 6 replicas (healthy), but one pod still answers version 3.7.9.",
            wrong=["The deploy API reports 3.8.2 on all 6 replicas (healthy), and every pod answers version 3.8.2 as well.",
                   "The deploy API reports 3.7.9 on 1 replica (stalled), but five pods already answer version 3.8.2.",
                   "The deploy API reports 3.7.9 on every pod (healthy), but the pods themselves answer version 3.8.2."])
    s.probe("entity_recall", "Which pod is running the old version, and which ReplicaSet does it belong to?",
            [["5f48b1-tq7nn", "tq7nn"], ["payments-api-5f48b1", "5f48b1"]], ["3.7.9", "registry.internal/payments-api:3.7.9"],
            "The pod payments-api-5f48b1-tq7nn, from the old ReplicaSet payments-api-5f48b1 (image 3.7.9).",
            wrong=["The pod payments-api-6b7c9d-4kq2m, from the old ReplicaSet payments-api-6b7c9d (image 3.7.9).",
                   "The pod payments-api-6b7c9d-w0hd3, from the new ReplicaSet payments-api-6b7c9d (image 3.8.2).",
                   "The pod payments-api-6b7c9d-jm4fp, from the old ReplicaSet payments-api-5f48b1 (image 3.7.9)."])
    s.probe("contradiction_awareness", "Why do the deploy API's numbers disagree with reality?",
            [["disruption budget", "payments-pdb", "PDB"], ["evict"]], [["minAvailable", "min available"], ["ProgressDeadlineExceeded", "stalled"], ["desired", "new template"]],
            "The rollout stalled because payments-pdb (minAvailable=6) blocks eviction of the last old pod, while the deploy API "
            "counts the new template's desired replicas and reports 6/6 regardless.",
            wrong=["The rollout stalled because the new 3.8.2 image failed its readiness probe on the last pod, while the "
                    "deploy API counts the new template's desired replicas and reports 6/6 regardless.",
                   "The rollout was paused by r.bianchi for the black-friday drill, while the deploy API counts the new "
                    "template's desired replicas and reports 6/6 regardless."])
    return s


def long() -> Scenario:
    s = Scenario("contradiction-long", "contradiction", "long", "Ledger and bank statement disagree on a settlement batch")
    s.system(SYSTEM + " Finance systems: the internal ledger database, bank statement files (CAMT.053) in /data/bank, "
                      "and the reconciliation service.")
    s.user("Reconciliation flagged settlement batch SB-0614 as unbalanced. Tell me what each source says and why they differ.")
    s.step("The ledger side first.", "sql_query",
           {"db": "ledger", "query": "SELECT count(*), sum(amount_eur) FROM settlement_lines WHERE batch = 'SB-0614'"},
           {"columns": ["count", "sum"], "rows": [[1822, 1284550.20]]})
    s.step("The ledger has 1,822 lines totalling EUR 1,284,550.20. Now the bank statement for the same value date.", "run_shell",
           {"cmd": "xmllint --xpath 'string(//Ntry[NtryRef=\"SB-0614\"]/Amt)' /data/bank/camt053_2026-06-14.xml; echo; "
                   "xmllint --xpath 'count(//Ntry[NtryRef=\"SB-0614\"]//TxDtls)' /data/bank/camt053_2026-06-14.xml"},
           "1283950.20\n1821")
    s.step("The bank books EUR 1,283,950.20 over 1,821 transactions: EUR 600.00 less and one transaction fewer. "
           "Finding the line the bank does not have.", "sql_query",
           {"db": "ledger", "query": "SELECT l.tx_id, l.amount_eur, l.counterparty FROM settlement_lines l LEFT JOIN bank_tx b ON b.end_to_end_id = l.tx_id WHERE l.batch = 'SB-0614' AND b.end_to_end_id IS NULL"},
           {"columns": ["tx_id", "amount_eur", "counterparty"], "rows": [["TX-77120", 600.00, "Brasserie Kolmar SARL"]]})
    s.step("TX-77120, EUR 600.00 to Brasserie Kolmar SARL. Searching the bank file for it.", "grep_logs",
           {"pattern": "TX-77120", "path": "/data/bank/*.xml", "since": "2026-06-10"},
           "camt053_2026-06-15.xml: <RtrInf><Rsn><Cd>AC04</Cd></Rsn><AddtlInf>TX-77120 returned: account closed</AddtlInf></RtrInf>")
    s.step("The bank returned it the next day with reason AC04, account closed. Checking what the reconciliation service shows.",
           "http_get", {"url": "http://recon.internal/api/batches/SB-0614"},
           {"batch": "SB-0614", "status": "reconciled", "ledger_total": 1284550.20, "bank_total": 1284550.20,
            "note": "bank_total copied from expected file when statement parse failed"})
    s.say("A third disagreement: the reconciliation service marks the batch reconciled, but only because it copied the ledger "
          "total into bank_total after failing to parse the statement. The ledger still counts TX-77120 as paid while the bank "
          "returned it. I'll check the surrounding systems before writing the finding up.")
    s.filler(27, seed=614, ctx={"host": "recon.internal", "services": ["recon-svc", "ledger-api", "statement-parser"],
                                "ns": "finance", "db": "ledger", "repo": "finance-recon"},
             first_text="Starting with the services that feed reconciliation.")
    s.step("Last, the open items of the merchant support queue.", "http_get",
           {"url": "http://tickets.local/api/search?q=queue:merchant-support+status:open&limit=1"},
           {"total": 1, "items": [{"key": "MS-2208", "summary": "Update payout IBAN request", "status": "waiting"}]})
    s.say("A merchant ticket is waiting on a payout bank-details update, which is worth linking to the finding.")
    s.probe("contradiction_awareness", "What total does the ledger give for the batch, and what total does the bank statement give?",
            [["1,284,550.20", "1284550.20", "1,284,550.2", "1284550.2", "1,284,550", "1284550"],
             ["1,283,950.20", "1283950.20", "1,283,950.2", "1283950.2", "1,283,950", "1283950"]], [["600"], ["1,822", "1822"], ["1,821", "1821"]],
            "The ledger totals EUR 1,284,550.20 over 1,822 lines; the bank statement books EUR 1,283,950.20 over 1,821 transactions, "
            "EUR 600.00 less.",
            wrong=["The ledger totals EUR 1,284,550.20 over 1,822 lines; the bank statement books the same EUR 1,284,550.20, "
                    "so the two agree.",
                   "The ledger totals EUR 1,283,950.20 over 1,821 lines; the bank statement books the same EUR 1,283,950.20, "
                    "so the two agree."])
    s.probe("contradiction_awareness", "What does the reconciliation service report for the batch, and can that be trusted?",
            [["reconciled"], ["copied", "parse failed", "failed to parse", "parse fail"]], [["expected file"], ["bank_total"]],
            "It reports the batch as reconciled, but only because it copied the ledger total into bank_total when it failed to "
            "parse the statement; the figure cannot be trusted.",
            wrong=["It reports the batch as unbalanced, with a EUR 600.00 gap between ledger_total and bank_total; that "
                    "figure matches the statement and can be trusted.",
                   "It reports the batch as reconciled, with both totals read from the ledger and the CAMT.053 statement, so "
                    "the figure can be trusted."])
    s.probe("causal_fidelity", "Which transaction explains the difference, and why is it missing at the bank?",
            [["TX-77120", "77120"], ["account closed", "AC04", "returned"]], [["Kolmar"], ["600"]],
            "TX-77120 (EUR 600.00 to Brasserie Kolmar SARL) was returned by the bank with reason AC04, account closed, while the "
            "ledger still counts it as paid.",
            wrong=["MS-2208 (a payout IBAN update for a merchant) was returned by the bank with reason AC04, account closed, "
                    "while the ledger still counts it as paid.",
                   "TX-77120 (EUR 600.00 to Brasserie Kolmar SARL) was never sent to the bank because the statement parser "
                    "failed, while the ledger counts it as paid."])
    return s


def build():
    return [short(), medium(), long()]
