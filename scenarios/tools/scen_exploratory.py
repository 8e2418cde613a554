"""exploratory: several failed attempts, then a success."""

from mfscen import Scenario

SYSTEM = ("You are a data and infrastructure assistant. Tools: http_get(url), http_post(url, body), sql_query(db, query, host), "
          "run_shell(cmd), read_file(path), grep_logs(pattern, path, since). When a tool fails, try another route; "
          "report what finally worked.")


def short() -> Scenario:
    s = Scenario("exploratory-short", "exploratory", "short", "Count the rows of a large event partition")
    s.system(SYSTEM)
    s.user("How many rows are in the May 2026 partition of the events table? The capacity planning sheet needs the exact number.")
    s.step("Trying the primary first.", "sql_query",
           {"db": "events", "host": "pg-primary", "query": "SELECT count(*) FROM events_2026_05"},
           "ERROR:  permission denied for table events_2026_05\nDETAIL:  role \"support_ro\" has no SELECT privilege on partitions of public.events",
           is_error=True)
    s.step("My role cannot read the partition on the primary. Trying the read replica.", "sql_query",
           {"db": "events", "host": "pg-replica-1", "query": "SELECT count(*) FROM events_2026_05"},
           "ERROR:  canceling statement due to statement timeout\nCONTEXT:  parallel worker; statement_timeout is 15s on pg-replica-1",
           is_error=True)
    s.step("Timed out after 15 s. Maybe the metrics API has table stats.", "http_get",
           {"url": "http://dbstats.internal/api/tables/events_2026_05"},
           "HTTP 404 Not Found\n{\"error\": \"table not tracked\", \"tracked_prefixes\": [\"orders_\", \"users\"]}", is_error=True)
    s.step("Not tracked there. The planner statistics on the replica at least give an estimate.", "sql_query",
           {"db": "events", "host": "pg-replica-1",
            "query": "SELECT reltuples::bigint, last_analyze FROM pg_class c LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid WHERE relname = 'events_2026_05'"},
           {"columns": ["reltuples", "last_analyze"], "rows": [[12702400, "2026-06-01T03:12:09Z"]], "elapsed_ms": 3})
    s.step("That is only the planner's estimate (about 12.7 million, last analysed on 1 June), and the sheet wants the exact "
           "figure. The analytics replica allows long queries, so I'll run the exact count there with a higher timeout.",
           "sql_query", {"db": "events", "host": "analytics-replica-2",
                         "query": "SET statement_timeout = '120s'; SELECT count(*) FROM events_2026_05"},
           {"columns": ["count"], "rows": [[12884310]], "elapsed_ms": 41710, "host": "analytics-replica-2",
            "notices": ["SET", "parallel workers planned: 4, launched: 4"], "snapshot": "2026-06-12T09:41:03Z"})
    s.step("That worked: the exact count came back after about 42 seconds. For the sheet I'll also grab the on-disk size; "
           "that is a cheap catalog call, so the regular replica is fine.", "sql_query",
           {"db": "events", "host": "pg-replica-1",
            "query": "SELECT pg_size_pretty(pg_total_relation_size('events_2026_05'))"},
           {"columns": ["pg_size_pretty"], "rows": [["9817 MB"]], "elapsed_ms": 4, "host": "pg-replica-1"})
    s.probe("fact_retention", "What is the exact row count of the partition?",
            [["12884310", "12,884,310", "12 884 310", "12.884.310"]], [["analytics-replica-2", "analytics replica"], ["41.7", "41710", "42 s", "42 seconds"]],
            "The partition events_2026_05 has 12,884,310 rows (counted on analytics-replica-2 in 41.7 s).",
            wrong=["The partition events_2026_05 has 12,702,400 rows (counted on pg-replica-1 in 3 ms).",
                   "The partition events_2026_05 has 9,817,000 rows (counted on analytics-replica-2 in 41.7 s)."])
    s.probe("causal_fidelity", "Why did the first attempt, on the primary, fail?",
            [["permission denied", "no SELECT privilege", "permission"]], ["support_ro", ["privilege", "grant"]],
            "The role support_ro has no SELECT privilege on the events partitions, so the primary returned permission denied.",
            wrong=["The statement_timeout of 15 s on the primary cancelled the count before the partition was scanned.",
                   "The table events_2026_05 is not tracked on the primary, so it answered 404 Not Found for the partition."])
    s.probe("entity_recall", "Which database host finally answered, and what had to be changed to make it work?",
            [["analytics-replica-2", "analytics replica 2"], ["statement_timeout", "timeout"]], [["120s", "120 s", "120 seconds"], "pg-replica-1"],
            "analytics-replica-2, after raising statement_timeout to 120 s (pg-replica-1 had cancelled the query at 15 s).",
            wrong=["pg-replica-1, after granting SELECT to support_ro (pg-primary had refused the query with permission "
                    "denied).",
                   "pg-primary, after switching to the pg_class estimate (dbstats.internal had answered 404, table not "
                    "tracked).",
                   "analytics-replica-2, after granting SELECT to support_ro (pg-primary had refused the query with "
                    "permission denied)."])
    return s


def medium() -> Scenario:
    s = Scenario("exploratory-medium", "exploratory", "medium", "Find the latest Android build when the CI API keeps refusing")
    s.system(SYSTEM + " CI is a self-hosted build server; release artefacts are mirrored to an artefact repository.")
    s.user("What is the latest Android app build, and has it reached production yet? I need version and build number.")
    s.step("Querying the CI builds endpoint.", "http_get",
           {"url": "http://ci.internal/api/v1/builds?project=mobile/android&branch=release&limit=1"},
           "HTTP 410 Gone\n{\"error\": \"API v1 was removed on 2026-01-31\", \"migrate_to\": \"/api/v2\"}", is_error=True)
    s.step("The v1 API is gone. Retrying on v2 with the stored token.", "http_get",
           {"url": "http://ci.internal/api/v2/projects/mobile%2Fandroid/builds?branch=release&limit=1", "auth": "token:ci-readonly"},
           "HTTP 401 Unauthorized\n{\"error\": \"token expired\", \"expired_at\": \"2026-09-30T00:00:00Z\"}", is_error=True)
    s.step("The token expired. Refreshing it.", "http_post",
           {"url": "http://ci.internal/api/v2/auth/refresh", "body": {"token_name": "ci-readonly"}},
           {"token_name": "ci-readonly", "expires_at": "2026-12-31T00:00:00Z", "scopes": ["read:pipelines"]})
    s.step("New token issued, though only with read:pipelines. Trying the builds again.", "http_get",
           {"url": "http://ci.internal/api/v2/projects/mobile%2Fandroid/builds?branch=release&limit=1", "auth": "token:ci-readonly"},
           "HTTP 403 Forbidden\n{\"error\": \"missing scope\", \"required\": \"read:artifacts\", \"granted\": [\"read:pipelines\"]}",
           is_error=True)
    s.step("Build details need read:artifacts, which this token cannot get. Pipelines are readable, so let me try those.", "http_get",
           {"url": "http://ci.internal/api/v2/projects/mobile-android/pipelines?ref=release&limit=1", "auth": "token:ci-readonly"},
           "HTTP 404 Not Found\n{\"error\": \"project 'mobile-android' not found\"}", is_error=True)
    s.step("Wrong project slug. Instead of fighting CI, I'll go to the artefact repository where releases are mirrored.", "http_get",
           {"url": "http://artifacts.internal/service/rest/v1/search?repository=mobile-releases&name=app-release&sort=version&direction=desc&limit=3"},
           {"items": [
               {"version": "7.18.0", "build": 41233, "uploaded": "2026-10-02T11:47Z", "sha256": "c41f...9ab2", "channel_hint": "beta"},
               {"version": "7.17.2", "build": 41107, "uploaded": "2026-09-24T08:15Z", "sha256": "77e0...1d4c", "channel_hint": "production"},
               {"version": "7.17.1", "build": 41060, "uploaded": "2026-09-19T16:02Z", "sha256": "0b9a...e311", "channel_hint": "production"}]})
    s.step("Success: the newest artefact is 7.18.0, build 41233. Checking the store tracks to see where it is.", "http_get",
           {"url": "http://release-bot.internal/api/android/tracks"},
           {"tracks": [{"track": "production", "version": "7.17.2", "build": 41107, "rollout": "100%"},
                       {"track": "beta", "version": "7.18.0", "build": 41233, "rollout": "100%", "since": "2026-10-02T14:30Z"},
                       {"track": "internal", "version": "7.18.0", "build": 41233}]})
    s.say("So the newest build is only on the beta and internal tracks; production still serves 7.17.2 (build 41107).")
    s.filler(8, seed=41233, ctx={"host": "release-bot.internal", "services": ["ci-server", "release-bot", "artifact-proxy"],
                                 "ns": "build", "db": "ci_ro", "repo": "mobile-ci"},
             first_text="I'll make sure the release tooling is healthy before reporting.")
    s.step("Checking whether a production promotion is scheduled.", "http_get",
           {"url": "http://release-bot.internal/api/android/schedule"},
           {"scheduled": [], "freeze": {"active": True, "until": "2026-10-06T06:00Z", "reason": "quarter-end freeze"}})
    s.say("There is an active release freeze until 6 October 06:00 UTC, so no promotion can happen before then.")
    s.probe("fact_retention", "What is the newest Android build and version number?",
            [["41233", "41,233"], ["7.18.0"]], [["beta"], ["2026-10-02", "2 October", "Oct 2"]],
            "The newest build is version 7.18.0, build 41233, uploaded 2026-10-02 and on the beta track.",
            wrong=["The newest build is version 7.17.2, build 41107, uploaded 2026-09-24 and on the production track.",
                   "The newest build is version 7.17.1, build 41060, uploaded 2026-09-19 and on the production track.",
                   "The newest build is version 7.18.0, build 41107, uploaded 2026-09-24 and on the production track."])
    s.probe("causal_fidelity", "Why did the very first CI request fail?",
            [["removed", "410", "Gone"]], [["2026-01-31", "31 January", "January 31"], ["/api/v2", "api v2"]],
            "The CI API v1 was removed on 2026-01-31 (HTTP 410 Gone); clients must use /api/v2.",
            wrong=["The CI token ci-readonly had expired on 2026-09-30 (HTTP 401 Unauthorized); it had to be refreshed.",
                   "The CI token lacked the read:artifacts scope (HTTP 403 Forbidden); only read:pipelines was granted.",
                   "The CI project slug mobile-android did not exist (HTTP 404 Not Found); the project name was wrong."])
    s.probe("temporal_ordering", "Which attempt came immediately before the call that finally succeeded, and how did it fail?",
            [["mobile-android", "slug", "pipelines"], ["404", "not found"]], [["403", "read:artifacts", "scope"], "artifact"],
            "Just before the artefact repository search, the pipelines call with the slug 'mobile-android' failed with 404 "
            "project not found (the 403 missing-scope error came before that).",
            wrong=["Just before the artefact repository search, the builds call with the refreshed token failed with 403 "
                    "missing scope read:artifacts (the 401 expired-token error came before that).",
                   "Just before the artefact repository search, the token refresh returned a new token with only "
                    "read:pipelines scope (the 401 expired-token error came before that).",
                   "Just before the artefact repository search, the v2 builds call failed with 401 token expired (the 410 "
                    "API-removed error came before that)."])
    return s


def long() -> Scenario:
    s = Scenario("exploratory-long", "exploratory", "long", "Reports service cannot reach Redis in staging")
    s.system(SYSTEM + " Environment: Kubernetes staging cluster; the reports service runs in namespace reports.")
    s.user("In staging the reports service logs 'redis unavailable' on every request since this morning. Find out how to "
           "reach Redis from it and why it can't.")
    s.step("Pinging Redis from a reports pod with the configured address.", "run_shell",
           {"cmd": "kubectl -n reports exec deploy/reports -- redis-cli -h redis.staging -p 6379 ping"},
           "Could not connect to Redis at redis.staging:6379: Name or service not known\ncommand terminated with exit code 1",
           is_error=True)
    s.step("The name does not resolve. Checking DNS for the full service name.", "run_shell",
           {"cmd": "kubectl -n reports exec deploy/reports -- nslookup redis.staging.svc.cluster.local"},
           "Server:\t10.96.0.10\nAddress:\t10.96.0.10#53\n** server can't find redis.staging.svc.cluster.local: NXDOMAIN\n"
           "command terminated with exit code 1", is_error=True)
    s.step("No such service any more. Searching all namespaces for Redis services.", "run_shell",
           {"cmd": "kubectl get svc -A | grep -i redis"},
           "cache       redis-main       ClusterIP   10.96.44.12   <none>   6380/TCP   12d\n"
           "cache       redis-main-hl    ClusterIP   None          <none>   6380/TCP   12d")
    s.step("There is redis-main in namespace cache, on port 6380. Trying it.", "run_shell",
           {"cmd": "kubectl -n reports exec deploy/reports -- redis-cli -h redis-main.cache.svc.cluster.local -p 6380 ping"},
           "Error: Connection reset by peer\ncommand terminated with exit code 1", is_error=True)
    s.step("A reset on connect usually means the server expects TLS. Retrying with TLS and the cluster CA.", "run_shell",
           {"cmd": "kubectl -n reports exec deploy/reports -- redis-cli --tls --cacert /etc/ssl/cluster-ca.crt -h redis-main.cache.svc.cluster.local -p 6380 ping"},
           "(error) NOAUTH Authentication required.", is_error=True)
    s.step("TLS works now, but it wants a password. Reading the secret meant for reports.", "run_shell",
           {"cmd": "kubectl -n reports get secret reports-redis -o jsonpath='{.data}' | jq 'keys'"},
           "[\"REDIS_PASSWORD\", \"REDIS_URL\"]")
    s.step("Trying again with the password from that secret.", "run_shell",
           {"cmd": "kubectl -n reports exec deploy/reports -- sh -c 'redis-cli --tls --cacert /etc/ssl/cluster-ca.crt -h redis-main.cache.svc.cluster.local -p 6380 -a \"$REDIS_PASSWORD\" --no-auth-warning ping'"},
           "PONG")
    s.step("PONG: Redis is reachable over TLS on 6380 with auth. Now, what does the service itself use?", "run_shell",
           {"cmd": "kubectl -n reports get deploy reports -o jsonpath='{.spec.template.spec.containers[0].env}' | jq -c '.[] | select(.name|test(\"REDIS\"))'"},
           "{\"name\":\"REDIS_URL\",\"value\":\"redis://redis.staging:6379/2\"}\n"
           "{\"name\":\"REDIS_PASSWORD\",\"valueFrom\":{\"secretKeyRef\":{\"name\":\"reports-redis\",\"key\":\"REDIS_PASSWORD\"}}}")
    s.step("The deployment hard-codes the old URL instead of reading REDIS_URL from the secret. Looking for the migration notice.",
           "http_get", {"url": "http://changes.internal/api/changes?component=redis&env=staging&limit=1"},
           {"changes": [{"id": "CHG-4102", "done": "2026-03-03T07:30Z", "owner": "platform-team",
                         "summary": "Move staging Redis to namespace cache as redis-main; TLS only on 6380; old service redis.staging deleted",
                         "action_for_clients": "use REDIS_URL from your *-redis secret"}]})
    s.say("Found it. I'll go through the rest of the reports service's dependencies too, so the fix doesn't uncover a second problem.")
    s.filler(25, seed=4102, ctx={"host": "reports.staging.internal", "services": ["reports", "reports-worker", "pdf-render"],
                                 "ns": "reports", "db": "reports_ro", "repo": "reports"},
             first_text="Beginning with the reports service itself.")
    s.step("Last, the worker's queue consumer lag.", "http_get",
           {"url": "http://reports.staging.internal/reports-worker/metrics/lag"},
           {"consumer_group": "reports-worker", "lag": 3, "partitions": 6})
    s.say("The worker is keeping up, so only the connection setting needs changing; I can draft the deployment patch next.")
    s.probe("fact_retention", "Which Redis host and port finally answered the ping?",
            [["redis-main"], ["6380"]], [["TLS", "--tls"], ["password", "REDIS_PASSWORD", "auth"]],
            "redis-main.cache.svc.cluster.local on port 6380, over TLS and with the password from the reports-redis secret.",
            wrong=["redis.staging.svc.cluster.local on port 6379, over TLS and with the password from the reports-redis "
                    "secret.",
                   "redis-main.cache.svc.cluster.local on port 6379, without TLS and with the password from the reports-redis "
                    "secret."])
    s.probe("causal_fidelity", "Why does the reports service fail to connect?",
            [["redis.staging"], ["hard-code", "hardcode", "old URL", "stale", "outdated", "still points"]], [["deleted", "moved", "migrat"], ["6379"], "TLS"],
            "Its deployment hard-codes the old REDIS_URL redis://redis.staging:6379/2, but that service was deleted when Redis moved "
            "to redis-main (TLS only, port 6380); it should read REDIS_URL from its secret.",
            wrong=["Its secret reports-redis holds a wrong REDIS_PASSWORD, so redis-main rejects it with NOAUTH "
                    "Authentication required; it should get a new password in its secret.",
                   "Its pods cannot resolve any name because cluster DNS at 10.96.0.10 is down; once DNS recovers, "
                    "redis.staging:6379 will answer again and nothing else needs to change.",
                   "Its connections are reset by redis-main on port 6380 because the cluster CA in /etc/ssl/cluster-ca.crt "
                    "expired; it should be given a renewed CA certificate."])
    s.probe("entity_recall", "Which change moved Redis, and which team owns that change?",
            [["CHG-4102", "4102"]], [["platform-team", "platform team"], ["namespace cache", "cache namespace", "in cache"], ["2026-03-03", "3 March", "March 3"]],
            "Change CHG-4102 by platform-team, done 2026-03-03, moved Redis into namespace cache as redis-main.",
            wrong=["Change OPS-1029 by platform-team, done 2026-03-03, moved Redis into namespace cache as redis-main.",
                   "Change OPS-1773 by r.costa, done 12 days ago, moved Redis into namespace reports as redis.staging."])
    return s


def build():
    return [short(), medium(), long()]
