#!/usr/bin/env bash
# The data plane's load benchmark: one load generator (wrk), one local origin (nginx
# serving a 1 KiB page), and four front ends measured side by side in one run, in
# interleaved rounds:
#   (a) botgate, full protection: bot_protection on, the classifier and all nine rule
#       sets deciding every request;
#   (b) botgate, protection off (the same process, another website);
#   (c) nginx proxy_pass (2 workers);
#   (d) nginx with ModSecurity and the OWASP CRS (2 workers, SecRuleEngine On);
# and each of the first three with one thread instead of one per core (a1, b1: a second
# botgate with `--threads 1`, on a copy of the store; c1: nginx with one worker), since
# the generator and the origin share the cores with the front end.
# Over TLS, botgate (full protection, as (a)) against nginx proxy_pass (2 workers) with
# the same ECDSA P-256 certificate and TLS 1.3: (as, cs) HTTPS keep-alive; (an, cn) a
# new TLS connection, handshake included, for every request (wrk with `Connection:
# close`); (a2, c2) HTTP/2 (h2load, 10 streams at once per connection); and (bs, b2)
# botgate with protection off, as (b), over HTTPS keep-alive and HTTP/2. Each of them
# also with one thread or worker when named (as1, cs1, an1, cn1, a21, c21, bs1, b21),
# compared as over plain HTTP: each product at its faster count, and at one per core.
# Three reference proxies can run beside them (FRONTENDS="... r h x"), the floor under
# botgate's proxy core (benches/load/reference): (r) tokio + httparse and nothing else,
# (h) hyper's server and client with botgate's timeouts and nothing else, (x) as (h) with
# the origin connection driven inline instead of by hyper's client.
# Every request is a browser's page view (the same headers for all four), which the
# rule components classify as `humans` and grant.
#
#   benches/load/run.sh                      # 3 rounds of 10 s per front end
#   ROUNDS=5 DURATION=20 benches/load/run.sh
#   PROFILE=1 benches/load/run.sh             # also `perf record` botgate in round 1
#   FRONTENDS="a c" benches/load/run.sh       # only some front ends (a a1 b b1 c c1 d
#                                             # as cs an cn a2 c2 bs b2, each of these
#                                             # with 1 appended: one thread, r h x)
#   HOLD=1 benches/load/run.sh                # set up, print the wrk commands, and wait
#                                             # (for perf, strace, ...) until Ctrl-C
#   AB="OLD NEW" benches/load/run.sh          # compare two botgate binaries (below)
#   CALLGRIND="OLD NEW" benches/load/run.sh   # instructions per request of two binaries
#                                             # under valgrind's callgrind (below)
#   BOTGATE=path/to/botgate benches/load/run.sh  # measure that binary (not built here)
#   TRAIN=1 BOTGATE=... benches/load/run.sh   # the profile-guided build's training load
#
# AB compares two builds of botgate on a machine too noisy for one-after-the-other runs:
# both serve at once, each on its own copy of the store and its own ports, under two
# simultaneous `wrk -c(CONNECTIONS/2)`, and each round prints both builds' CPU per
# request for (a) (or AB_FRONTEND=b) and NEW's share of OLD's, in all and in user space
# alone (measured no steadier than the total; for changes under a few percent, use
# CALLGRIND); which starts first swaps every round (the build started second measures
# a few percent cheaper, so keep the rounds even). AB_ROUNDS (default 6) rounds of
# DURATION. AB_RULESETS="OLD_DIR NEW_DIR"
# gives each build its own folder of rule components (to compare two guest builds, with
# one binary named twice in AB); by default both load the shipped ones.
#
# Prints one table (medians over the rounds; the CPU each front end, the origin and wrk
# spent per request) and leaves the logs (and profiles, with
# PROFILE=1: `perf report -i target/load-bench/perf-a.data`) in target/load-bench/.
# Installs nginx-light, libnginx-mod-http-modsecurity, modsecurity-crs, wrk and
# nghttp2-client (h2load) with apt-get when missing. Not run by CI.
set -euo pipefail
cd "$(dirname "$0")/../.."
# The benchmark's origin is on loopback, which botgate's origin policy refuses unless
# allowed (an environment variable, so that AB's older builds, which have no such
# policy, start as well).
export BOTGATE_ORIGIN_ALLOW_NETWORKS=127.0.0.0/8

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-10}
CONNECTIONS=${CONNECTIONS:-32}
THREADS=${THREADS:-1}

sudo_if_needed=(); [[ $(id -u) -eq 0 ]] || sudo_if_needed=(sudo)
missing=()
command -v wrk >/dev/null || missing+=(wrk)
command -v h2load >/dev/null || missing+=(nghttp2-client)
[[ -x /usr/sbin/nginx ]] || missing+=(nginx-light)
[[ -e /usr/lib/nginx/modules/ngx_http_modsecurity_module.so ]] || missing+=(libnginx-mod-http-modsecurity)
[[ -d /usr/share/modsecurity-crs/rules ]] || missing+=(modsecurity-crs)
if ((${#missing[@]})); then
    "${sudo_if_needed[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${sudo_if_needed[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

echo "== building botgate (release) and the rule components" >&2
rustup target add wasm32-wasip2 >/dev/null 2>&1 || true
cargo build -q --release --target wasm32-wasip2 --manifest-path rulesets/Cargo.toml
[[ -n ${BOTGATE:-} ]] || cargo build -q --release -p botgate-host --bin botgate
# Whether FRONTENDS names front end $1 (the reference proxies run only when named).
named() { [[ " ${FRONTENDS:-} " == *" $1 "* ]]; }
if named r || named h || named x; then
    cargo build -q --release --manifest-path benches/load/reference/Cargo.toml
fi

work=$PWD/target/load-bench
rm -rf "$work" && mkdir -p "$work"/{site,rulesets,data,modsec}
pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { for _ in $(seq 200); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.05; done; echo "nothing listens on $1" >&2; return 1; }

origin_port=$(free_port); proxy_port=$(free_port); proxy1_port=$(free_port); modsec_port=$(free_port)
tls_port=$(free_port); tls1_port=$(free_port)
http_port=$(free_port); https_port=$(free_port); api_port=$(free_port); admin_port=$(free_port)

head -c 1024 /dev/zero | tr '\0' 'x' | sed '1s/^/<!doctype html><title>bench<\/title>/' | head -c 1024 > "$work/site/index.html"

# One nginx per role, each with its own prefix, pid and logs. The access log is written
# as botgate writes its own: from a 64 KiB buffer, at least every 50 ms (unbuffered,
# nginx makes a `write` per request: about 5% of its CPU per request over TLS). Each
# worker keeps up to 256 idle origin connections, as each botgate thread does
# (--origin-idle-connections): more than the 160 requests a worker has in flight over
# HTTP/2 (32 connections of 10 streams, two workers), so neither opens an origin
# connection per request (with 64, a third of HTTP/2's requests did, and the kernel's
# search for a free port among the sockets in TIME_WAIT decided that row).
nginx_conf() { # name workers extra-main extra-http server-body
    cat > "$work/$1.conf" <<EOF
worker_processes $2;
pid $work/$1.pid;
error_log $work/$1.error.log warn;
$3
events { worker_connections 4096; }
http {
    access_log $work/$1.access.log combined buffer=64k flush=50ms;
    client_body_temp_path $work/$1.tmp;
    proxy_temp_path $work/$1.tmp;
    keepalive_requests 1000000;
    upstream origin { server 127.0.0.1:$origin_port; keepalive 256; }
    $4
    server {
        $5
    }
}
EOF
    mkdir -p "$work/$1.tmp"
    /usr/sbin/nginx -p "$work" -c "$work/$1.conf" -g 'daemon off;' &
    pids+=($!)
    printf -v "${1}_pid" %s $!
}
nginx_conf origin 1 "" "" "listen 127.0.0.1:$origin_port; root $work/site; location / { index index.html; }"
proxy_location="location / { proxy_pass http://origin; proxy_http_version 1.1; proxy_set_header Connection \"\"; proxy_set_header Host \$host; proxy_set_header X-Forwarded-For \$proxy_add_x_forwarded_for; }"
nginx_conf proxy 2 "" "" "listen 127.0.0.1:$proxy_port; $proxy_location"
nginx_conf proxy1 1 "" "" "listen 127.0.0.1:$proxy1_port; $proxy_location"
# One certificate for both TLS front ends: ECDSA P-256, the names of every website.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
    -keyout "$work/tls.key" -out "$work/tls.pem" -subj /CN=bench.example \
    -addext "subjectAltName=DNS:bench.example,DNS:protected.example,DNS:open.example" 2>/dev/null
for workers in 2 1; do
    name=proxytls port=$tls_port
    ((workers == 2)) || { name=proxytls1 port=$tls1_port; }
    nginx_conf "$name" "$workers" "" "" "listen 127.0.0.1:$port ssl http2; ssl_protocols TLSv1.3;
        ssl_certificate $work/tls.pem; ssl_certificate_key $work/tls.key; $proxy_location"
done

# ModSecurity: Debian's recommended configuration with the engine on, then the CRS as
# owasp-crs.load lists it (libmodsecurity3 has no IncludeOptional).
sed -e 's/^SecRuleEngine DetectionOnly/SecRuleEngine On/' \
    -e "s#^SecAuditLog .*#SecAuditLog $work/modsec/audit.log#" \
    -e "s#^SecDebugLog .*#SecDebugLog $work/modsec/debug.log#" \
    /etc/nginx/modsecurity.conf > "$work/modsec/modsecurity.conf"
cp /etc/nginx/unicode.mapping "$work/modsec/" 2>/dev/null || true
cat > "$work/modsec/main.conf" <<EOF
Include $work/modsec/modsecurity.conf
Include /etc/modsecurity/crs/crs-setup.conf
Include /etc/modsecurity/crs/REQUEST-900-EXCLUSION-RULES-BEFORE-CRS.conf
Include /usr/share/modsecurity-crs/rules/*.conf
Include /etc/modsecurity/crs/RESPONSE-999-EXCLUSION-RULES-AFTER-CRS.conf
EOF
nginx_conf modsec 2 "load_module /usr/lib/nginx/modules/ngx_http_modsecurity_module.so;" \
    "modsecurity on; modsecurity_rules_file $work/modsec/main.conf;" \
    "listen 127.0.0.1:$modsec_port; $proxy_location"

# botgate on the embedded store, with every shipped component.
for name in classifier crs bitrix cpanel dokuwiki drupal joomla nextcloud prestashop wordpress xenforo; do
    cp "rulesets/target/wasm32-wasip2/release/$name.wasm" "$work/rulesets/"
done
botgate=${BOTGATE:-target/release/botgate}
key=$("$botgate" partner create --data-dir "$work/data" bench | grep -o 'bgp_[A-Za-z0-9_-]*' | head -1)
"$botgate" serve --data-dir "$work/data" --rulesets-dir "$work/rulesets" \
    --http-listen "127.0.0.1:$http_port" --https-listen "127.0.0.1:$https_port" \
    --api-listen "127.0.0.1:$api_port" --admin-listen "127.0.0.1:$admin_port" \
    --origin-http-port "$origin_port" --fallback-cert "$work/tls.pem" --fallback-key "$work/tls.key" \
    > "$work/botgate.log" 2>&1 &
botgate_pid=$!
pids+=($botgate_pid)
for port in $origin_port $proxy_port $modsec_port $http_port $api_port; do wait_port "$port"; done
for _ in $(seq 200); do curl -sf "http://127.0.0.1:$admin_port/health" >/dev/null && break; sleep 0.1; done

api() { curl -sf -H "Authorization: Bearer $key" -H 'content-type: application/json' "$@"; }
api -d '{"id":"bench@example.com"}' "http://127.0.0.1:$api_port/v1.0/user" >/dev/null
every_ruleset='{"bitrix":true,"cpanel":true,"dokuwiki":true,"drupal":true,"joomla":true,"nextcloud":true,"prestashop":true,"wordpress":true,"xenforo":true}'
for site in protected:true open:false; do
    api -d "{\"user_id\":\"bench@example.com\",\"domain\":\"${site%%:*}.example\",\"ip\":[\"127.0.0.1\"],
             \"settings\":{\"loadbalancer\":{\"bot_protection\":${site##*:},\"ddos_protection\":false},
                           \"rulesets\":$every_ruleset}}" \
        "http://127.0.0.1:$api_port/v1.0/website" >/dev/null
done

browser=(-H 'User-Agent: Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36'
         -H 'Accept: text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8'
         -H 'Accept-Language: en-GB,en;q=0.9' -H 'Accept-Encoding: gzip, deflate, br'
         -H 'Sec-Fetch-Mode: navigate' -H 'Sec-Fetch-Site: none' -H 'Sec-Fetch-Dest: document')
declare -A target=(
    [a]="$http_port protected.example" [b]="$http_port open.example"
    [c]="$proxy_port bench.example" [c1]="$proxy1_port bench.example"
    [d]="$modsec_port bench.example"
    [as]="$https_port protected.example" [cs]="$tls_port bench.example"
    [an]="$https_port protected.example" [cn]="$tls_port bench.example"
    [a2]="$https_port protected.example" [c2]="$tls_port bench.example"
    [bs]="$https_port open.example" [b2]="$https_port open.example"
    [cs1]="$tls1_port bench.example" [cn1]="$tls1_port bench.example" [c21]="$tls1_port bench.example")
declare -A front_pid=([a]=$botgate_pid [b]=$botgate_pid [c]=$proxy_pid [c1]=$proxy1_pid [d]=$modsec_pid
    [as]=$botgate_pid [an]=$botgate_pid [a2]=$botgate_pid [bs]=$botgate_pid [b2]=$botgate_pid
    [cs]=$proxytls_pid [cn]=$proxytls_pid [c2]=$proxytls_pid
    [cs1]=$proxytls1_pid [cn1]=$proxytls1_pid [c21]=$proxytls1_pid)
# How each front end is loaded: plain HTTP/1.1 unless named here.
declare -A mode=([as]=https [cs]=https [an]=handshake [cn]=handshake [a2]=h2 [c2]=h2 [bs]=https [b2]=h2
    [as1]=https [cs1]=https [an1]=handshake [cn1]=handshake [a21]=h2 [c21]=h2 [bs1]=https [b21]=h2)
# The address wrk or h2load is given for front end $1 (port $2, host $3).
url_of() {
    case ${mode[$1]:-http} in
        http) echo "http://127.0.0.1:$2/" ;;
        h2) echo "https://$3:$2/" ;;
        *) echo "https://127.0.0.1:$2/" ;;
    esac
}
# Loads front end $1 (host $2, port $3, address $4) for DURATION seconds with wrk, or
# h2load for HTTP/2, with the browser's headers.
generate() {
    case ${mode[$1]:-http} in
        h2) h2load -t"$THREADS" -c"$CONNECTIONS" -m10 -D"$DURATION" \
                --connect-to="127.0.0.1:$3" "${browser[@]}" "$4" ;;
        handshake) wrk -t"$THREADS" -c"$CONNECTIONS" -d"${DURATION}s" --latency \
                "${browser[@]}" -H "Host: $2" -H 'Connection: close' "$4" ;;
        *) wrk -t"$THREADS" -c"$CONNECTIONS" -d"${DURATION}s" --latency "${browser[@]}" -H "Host: $2" "$4" ;;
    esac
}
# The requests a load (wrk's or h2load's output in file $1) completed.
requests_in() { awk '/requests in/ { print $1 } /^requests:/ { print $6 }' "$1"; }
# The rule components of the botgate whose admin listener is on port $1 that failed
# calls (`name failures calls`, one a line; nothing when none did) and, with `off` as $2,
# only those that failed often enough to be switched off: figures measured while one was
# off are not full protection's. (A call now and then running past its deadline on a
# busy machine is not that.) Metrics that cannot be read say so, and count as both.
components_failed() {
    local metrics
    metrics=$(curl -sf "http://127.0.0.1:$1/metrics") || { echo "(metrics unreadable)"; return 0; }
    awk -v off="${2:-}" '
        /^botgate_component_(failures|calls|disabled)_total/ {
            match($0, /component="[^"]*"/); name = substr($0, RSTART + 11, RLENGTH - 12)
            if ($0 ~ /^botgate_component_failures/) failures[name] = $NF
            else if ($0 ~ /^botgate_component_calls/) calls[name] = $NF
            else disabled[name] = $NF
        }
        END { for (name in failures) if (failures[name] > 0 && (off == "" || disabled[name] > 0))
            print name, failures[name], "of", calls[name] }' <<<"$metrics"
}
# The same websites on one data-plane thread (not for AB or TRAIN): a second botgate on
# a copy of the store (the same challenge secret, so the same pass holds).
if [[ -z ${AB:-} && ${TRAIN:-} != 1 ]]; then
    cp -a "$work/data" "$work/data1"
    http1_port=$(free_port); https1_port=$(free_port); admin1_port=$(free_port)
    "$botgate" serve --data-dir "$work/data1" --rulesets-dir "$work/rulesets" --threads 1 \
        --http-listen "127.0.0.1:$http1_port" --https-listen "127.0.0.1:$https1_port" \
        --api-listen "127.0.0.1:$(free_port)" --admin-listen "127.0.0.1:$admin1_port" \
        --origin-http-port "$origin_port" --fallback-cert "$work/tls.pem" --fallback-key "$work/tls.key" \
        > "$work/botgate1.log" 2>&1 &
    botgate1_pid=$!
    pids+=($botgate1_pid)
    for _ in $(seq 200); do curl -sf "http://127.0.0.1:$admin1_port/health" >/dev/null && break; sleep 0.1; done
    target[a1]="$http1_port protected.example"; target[b1]="$http1_port open.example"
    for run in as1 an1 a21; do target[$run]="$https1_port protected.example"; done
    for run in bs1 b21; do target[$run]="$https1_port open.example"; done
    for run in a1 b1 as1 an1 a21 bs1 b21; do front_pid[$run]=$botgate1_pid; done
fi
cores=$(nproc)
# The reference proxies, one thread per core as botgate (benches/load/reference).
for reference in r:raw h:hyper x:hyper-inline; do
    key=${reference%%:*} kind=${reference#*:}
    named "$key" || continue
    port=$(free_port)
    benches/load/reference/target/release/botgate-load-reference "$kind" "127.0.0.1:$port" \
        "127.0.0.1:$origin_port" "$cores" > "$work/reference-$kind.log" 2>&1 &
    pids+=($!)
    target[$key]="$port bench.example"; front_pid[$key]=$!
    wait_port "$port"
done
declare -A label=(
    [a]="(a) botgate, full protection, $cores threads" [b]="(b) botgate, protection off, $cores threads"
    [a1]="(a) botgate, full protection, 1 thread" [b1]="(b) botgate, protection off, 1 thread"
    [c]="(c) nginx proxy_pass, 2 workers" [c1]="(c) nginx proxy_pass, 1 worker"
    [d]="(d) nginx + ModSecurity + CRS, 2 workers"
    [as]="(as) botgate, full protection, HTTPS keep-alive" [cs]="(cs) nginx proxy_pass, HTTPS keep-alive"
    [an]="(an) botgate, full protection, a TLS handshake per request"
    [cn]="(cn) nginx proxy_pass, a TLS handshake per request"
    [a2]="(a2) botgate, full protection, HTTP/2" [c2]="(c2) nginx proxy_pass, HTTP/2"
    [bs]="(bs) botgate, protection off, HTTPS keep-alive" [b2]="(b2) botgate, protection off, HTTP/2"
    [as1]="(as) botgate, full protection, HTTPS keep-alive, 1 thread"
    [cs1]="(cs) nginx proxy_pass, HTTPS keep-alive, 1 worker"
    [an1]="(an) botgate, full protection, a TLS handshake per request, 1 thread"
    [cn1]="(cn) nginx proxy_pass, a TLS handshake per request, 1 worker"
    [a21]="(a2) botgate, full protection, HTTP/2, 1 thread" [c21]="(c2) nginx proxy_pass, HTTP/2, 1 worker"
    [bs1]="(bs) botgate, protection off, HTTPS keep-alive, 1 thread"
    [b21]="(b2) botgate, protection off, HTTP/2, 1 thread"
    [r]="(r) reference: tokio + httparse only, $cores threads"
    [h]="(h) reference: hyper + botgate's timeouts only, $cores threads"
    [x]="(x) reference: hyper server, origin driven inline, $cores threads")

# One address sending tens of thousands of page views a second is, rightly, a bot to the
# components: the load generator carries the pass of a solved challenge, as a visitor
# who solved one does, so the full decision still runs and the policy grants.
pass_cookie=$(python3 benches/load/pass.py "$http_port" protected.example)
browser+=(-H "Cookie: $pass_cookie")

# Each front end must answer the page before it is measured.
for run in "${!target[@]}"; do
    read -r port host <<<"${target[$run]}"
    for _ in $(seq 100); do
        status=$(curl -sk -o /dev/null -w '%{http_code}' "${browser[@]}" -H "Host: $host" \
            --connect-to "$host:$port:127.0.0.1:$port" "$(url_of "$run" "$port" "$host")")
        [[ $status == 200 ]] && break
        sleep 0.1
    done
    [[ $status == 200 ]] || { echo "${label[$run]} answers $status, not 200; see $work" >&2; exit 1; }
done

# TRAIN=1: the load a profile-guided build learns from (scripts/build-release.sh), then
# exit. Every path a production gateway runs hot, not only the benchmark's page view:
# HTTP/1.1 and HTTPS (TLS 1.3), HTTP/2, protection on and off, a CMS rule set in scope,
# and bots that get the challenge page.
if [[ ${TRAIN:-} == 1 ]]; then
    read -r _ protected <<<"${target[a]}"
    read -r _ open <<<"${target[b]}"
    bot=(-H 'User-Agent: python-requests/2.31.0' -H 'Accept: */*')
    train() { # what, wrk arguments...
        local out
        out=$(wrk -t1 -c16 -d"${DURATION}s" "${@:2}")
        echo "train $1: $(awk '/^Requests\/sec:/ {print $2}' <<<"$out") req/s" >&2
    }
    train "page view, protected" "${browser[@]}" -H "Host: $protected" "http://127.0.0.1:$http_port/"
    train "page view, unprotected" "${browser[@]}" -H "Host: $open" "http://127.0.0.1:$http_port/"
    train "page view, HTTPS" "${browser[@]}" -H "Host: $protected" "https://127.0.0.1:$https_port/"
    train "WordPress login, in a rule set's scope" "${browser[@]}" -H "Host: $protected" \
        "http://127.0.0.1:$http_port/wp-login.php"
    train "a library's requests, challenged" "${bot[@]}" -H "Host: $protected" "http://127.0.0.1:$http_port/"
    # HTTP/2: one curl multiplexing many requests over TLS.
    urls=()
    for i in $(seq 2000); do urls+=("https://127.0.0.1:$https_port/?page=$i"); done
    curl -sSk --no-progress-meter --http2 --parallel --parallel-max 32 --fail "${browser[@]}" -H "Host: $protected" "${urls[@]}" >/dev/null
    echo "train HTTP/2: ${#urls[@]} requests" >&2
    exit 0
fi

# CPU time (user + system, in clock ticks) of a process and its children (nginx's
# workers), from /proc; with `user` as $2, the user-space part only.
cpu_ticks() {
    local total=0 pid fields='$14 + $15'
    [[ ${2:-} == user ]] && fields='$14'
    for pid in "$1" $(pgrep -P "$1"); do
        total=$((total + $(awk "{print $fields}" "/proc/$pid/stat")))
    done
    echo "$total"
}
ticks_per_second=$(getconf CLK_TCK)
median() { sort -g | awk '{ v[NR]=$1 } END { if (NR%2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2 }'; }

# Two builds of botgate, each on its own copy of the store and its own ports (AB and
# CALLGRIND); `wrap` runs before the binary (valgrind for CALLGRIND).
if [[ -n ${AB:-} || -n ${CALLGRIND:-} ]]; then
    read -r old_binary new_binary <<<"${AB:-$CALLGRIND}"
    [[ -x $old_binary && -x $new_binary ]] || { echo "AB and CALLGRIND need two botgate binaries: \"OLD NEW\"" >&2; exit 1; }
    kill "$botgate_pid"; wait "$botgate_pid" 2>/dev/null || true
    read -r _ host <<<"${target[${AB_FRONTEND:-a}]}"
    declare -A binary=([old]=$old_binary [new]=$new_binary) pid port tls admin before before_user used used_user
    declare -A rulesets=([old]=$work/rulesets [new]=$work/rulesets)
    if [[ -n ${AB_RULESETS:-} ]]; then
        read -r old_rulesets new_rulesets <<<"$AB_RULESETS"
        [[ -d $old_rulesets && -d $new_rulesets ]] || { echo "AB_RULESETS needs two folders: AB_RULESETS=\"OLD NEW\"" >&2; exit 1; }
        rulesets=([old]=$old_rulesets [new]=$new_rulesets)
    fi
    wrap=()
    # Starts build $1 on its own copy of the store, on free ports, with any further
    # arguments given to `serve`.
    start_build() {
        rm -rf "$work/ab-$1" && cp -a "$work/data" "$work/ab-$1"
        port[$1]=$(free_port); tls[$1]=$(free_port); admin[$1]=$(free_port)
        "${wrap[@]}" "${binary[$1]}" serve --data-dir "$work/ab-$1" --rulesets-dir "${rulesets[$1]}" \
            --http-listen "127.0.0.1:${port[$1]}" --https-listen "127.0.0.1:${tls[$1]}" \
            --api-listen "127.0.0.1:$(free_port)" --admin-listen "127.0.0.1:${admin[$1]}" \
            --origin-http-port "$origin_port" --fallback-cert "$work/tls.pem" --fallback-key "$work/tls.key" \
            "${@:2}" > "$work/ab-$1.log" 2>&1 &
        pid[$1]=$!
        pids+=("${pid[$1]}")
        # Under valgrind, warming every component's instances takes minutes.
        local tries=1200; ((${#wrap[@]})) && tries=9000
        for _ in $(seq "$tries"); do
            curl -sf "http://127.0.0.1:${admin[$1]}/health" >/dev/null && return 0
            kill -0 "${pid[$1]}" 2>/dev/null || break
            sleep 0.1
        done
        echo "build $1 did not start; see $work/ab-$1.log" >&2
        exit 1
    }
fi

# CALLGRIND="OLD NEW" counts the instructions each build runs per request, under
# valgrind's callgrind, for (a) and (b) (or the front ends CG_FRONTENDS names, such as
# "bs b2": HTTPS and HTTP/2 against the build's own TLS listener): exact and repeatable
# where CPU time on a shared machine is not, so it can show a change of 1% that AB's
# rounds cannot. It counts user space only (not the kernel's share of each request),
# every thread of the process (one data-plane thread here, `--threads 1`), over
# CG_DURATION seconds (default 5) of the front end's load with 4 connections, after 2 s
# to warm up.
if [[ -n ${CALLGRIND:-} ]]; then
    command -v valgrind >/dev/null || {
        "${sudo_if_needed[@]}" apt-get update -qq
        DEBIAN_FRONTEND=noninteractive "${sudo_if_needed[@]}" apt-get install -y -qq --no-install-recommends valgrind
    }
    cg_load() { # build front-end duration
        local site listener=${port[$1]}
        read -r _ site <<<"${target[$2]}"
        [[ ${mode[$2]:-http} == http ]] || listener=${tls[$1]}
        CONNECTIONS=4 DURATION=${3%s} generate "$2" "$site" "$listener" "$(url_of "$2" "$listener" "$site")"
    }
    for build in old new; do
        wrap=(valgrind --tool=callgrind --callgrind-out-file="$work/callgrind-$build" --dump-instr=no)
        start_build "$build" --threads 1 --no-http3
        for run in ${CG_FRONTENDS:-a b}; do
            cg_load "$build" "$run" 2s >/dev/null
            callgrind_control --zero "${pid[$build]}" >/dev/null
            cg_load "$build" "$run" "${CG_DURATION:-5}s" > "$work/callgrind-$build-$run.txt"
            callgrind_control --dump="$run" "${pid[$build]}" >/dev/null
            sleep 1
            dump=$(ls -t "$work/callgrind-$build".* | head -1)
            python3 benches/load/callgrind_per_request.py "$work/callgrind-$build-$run.txt" "$dump" \
                "$build ${binary[$build]} ${label[$run]%%,*}" | tee -a "$work/callgrind.txt"
            if grep -Eq 'Non-2xx|[1-9][0-9]* (3xx|4xx|5xx|failed|errored|timeout)' "$work/callgrind-$build-$run.txt"; then
                echo "$build answered non-2xx; see $work/callgrind-$build-$run.txt" >&2
            fi
        done
        kill "${pid[$build]}"; wait "${pid[$build]}" 2>/dev/null || true
    done
    exit 0
fi

if [[ -n ${AB:-} ]]; then
    load() { # build duration
        local run=${AB_FRONTEND:-a} listener=${port[$1]}
        [[ ${mode[$run]:-http} == http ]] || listener=${tls[$1]}
        CONNECTIONS=$((CONNECTIONS / 2)) DURATION=${2%s} \
            generate "$run" "$host" "$listener" "$(url_of "$run" "$listener" "$host")"
    }
    for round in $(seq "${AB_ROUNDS:-6}"); do
        order=(old new); ((round % 2)) || order=(new old)
        for build in "${order[@]}"; do start_build "$build"; load "$build" 1s >/dev/null; done
        for build in old new; do
            before[$build]=$(cpu_ticks "${pid[$build]}")
            before_user[$build]=$(cpu_ticks "${pid[$build]}" user)
        done
        load_pids=()
        for build in "${order[@]}"; do
            load "$build" "${DURATION}s" > "$work/ab-$build-$round.txt" &
            load_pids+=($!)
        done
        wait "${load_pids[@]}"
        for build in old new; do
            done_requests=$(requests_in "$work/ab-$build-$round.txt")
            used[$build]=$(awk -v t=$(($(cpu_ticks "${pid[$build]}") - before[$build])) -v hz="$ticks_per_second" \
                -v n="$done_requests" 'BEGIN { printf "%.1f", t / hz * 1e6 / n }')
            used_user[$build]=$(awk -v t=$(($(cpu_ticks "${pid[$build]}" user) - before_user[$build])) -v hz="$ticks_per_second" \
                -v n="$done_requests" 'BEGIN { printf "%.2f", t / hz * 1e6 / n }')
            if grep -Eq 'Non-2xx|[1-9][0-9]* (3xx|4xx|5xx|failed|errored|timeout)' "$work/ab-$build-$round.txt"; then
                echo "round $round: $build answered non-2xx; see $work/ab-$build-$round.txt" >&2
            fi
            failed=$(components_failed "${admin[$build]}" off)
            [[ -z $failed ]] || echo "round $round: $build switched rule components off (failed calls: ${failed//$'\n'/, }): not full protection; see $work/ab-$build.log" >&2
            kill "${pid[$build]}"; wait "${pid[$build]}" 2>/dev/null || true
        done
        awk -v o="${used[old]}" -v n="${used[new]}" -v ou="${used_user[old]}" -v nu="${used_user[new]}" \
            -v r="$round" -v f="${order[0]}" 'BEGIN {
            printf "round %d (%s started first): old %.1f, new %.1f µs/request; new/old %.3f; user space old %.2f, new %.2f; new/old %.3f\n",
                r, f, o, n, n/o, ou, nu, (ou > 0 ? nu/ou : 0) }' \
            | tee -a "$work/ab.txt"
    done
    awk '{ print $12 }' "$work/ab.txt" | tr -d ';' | median | awk '{ printf "median new/old CPU per request: %.3f\n", $1 }'
    awk '{ print $NF }' "$work/ab.txt" | median | awk '{ printf "median new/old user-space CPU per request: %.3f\n", $1 }'
    exit 0
fi

FRONTENDS=${FRONTENDS:-a a1 b b1 c c1 d as cs an cn a2 c2 bs b2}
if [[ ${HOLD:-} == 1 ]]; then
    echo "botgate pid $botgate_pid; logs in $work. Each front end:" >&2
    for run in $FRONTENDS; do
        read -r port host <<<"${target[$run]}"
        printf '%s:\n ' "${label[$run]}" >&2
        # The command `generate` runs, printed instead.
        (wrk() { printf ' %q' wrk "$@" >&2; }; h2load() { printf ' %q' h2load "$@" >&2; }
         DURATION=10 generate "$run" "$host" "$port" "$(url_of "$run" "$port" "$host")")
        echo >&2
    done
    echo "Ctrl-C stops everything." >&2
    while sleep 3600; do :; done
fi

# wrk's latency in ms.
to_ms() { awk '{ v=$1; if (v ~ /us$/) { sub(/us$/,"",v); v/=1000 } else if (v ~ /ms$/) { sub(/ms$/,"",v) } else if (v ~ /s$/) { sub(/s$/,"",v); v*=1000 } printf "%.3f", v }'; }
for round in $(seq "$ROUNDS"); do
    for run in $FRONTENDS; do
        read -r port host <<<"${target[$run]}"
        profiler=
        if [[ ${PROFILE:-} == 1 && $round == 1 && $run =~ [ab] ]]; then
            perf record -q -F 999 -g -p "$botgate_pid" -o "$work/perf-$run.data" 2>/dev/null &
            profiler=$!
        fi
        cpu_before=$(cpu_ticks "${front_pid[$run]}")
        user_before=$(cpu_ticks "${front_pid[$run]}" user)
        origin_before=$(cpu_ticks "$origin_pid")
        url=$(url_of "$run" "$port" "$host")
        # `time` gives the generator's own CPU time (user and system seconds).
        wrk_cpu=$({ TIMEFORMAT='%U %S'; time generate "$run" "$host" "$port" "$url" > "$work/wrk.out"; } 2>&1)
        out=$(cat "$work/wrk.out")
        cpu_after=$(cpu_ticks "${front_pid[$run]}")
        user_after=$(cpu_ticks "${front_pid[$run]}" user)
        origin_after=$(cpu_ticks "$origin_pid")
        if [[ -n $profiler ]]; then kill -INT "$profiler"; wait "$profiler" || true; fi
        echo "$out" > "$work/wrk-$run-$round.txt"
        if [[ ${mode[$run]:-} == h2 ]]; then
            # h2load: no percentiles; the mean time for a request stands in the p50
            # column, and p99 is left out.
            rps=$(awk '/^finished in/ {print $4}' <<<"$out")
            p50=$(awk '/^time for request:/ {print $6}' <<<"$out" | to_ms)
            p99=-
            # 3xx, 4xx and 5xx answers, and requests that failed, errored or timed out.
            errors=$(awk '/^status codes:/ { n += $5 + $7 + $9 } /^requests:/ { n += $10 + $12 + $14 }
                END { print n }' <<<"$out")
            requests=$(requests_in "$work/wrk.out")
        else
            rps=$(awk '/^Requests\/sec:/ {print $2}' <<<"$out")
            p50=$(awk '$1=="50%" {print $2}' <<<"$out" | to_ms)
            p99=$(awk '$1=="99%" {print $2}' <<<"$out" | to_ms)
            errors=$(awk '/Non-2xx or 3xx responses:/ {print $5}' <<<"$out")
            requests=$(awk '/requests in/ {print $1}' <<<"$out")
        fi
        # The front end's CPU time per request, in µs: less at the mercy of the other
        # processes on the machine than requests/s.
        cpu_us=$(awk -v t=$((cpu_after - cpu_before)) -v hz="$ticks_per_second" -v n="$requests" \
            'BEGIN { printf "%.1f", t / hz * 1e6 / n }')
        # Of that, the front end's own code (the rest is the kernel's: syscalls, TCP).
        user_us=$(awk -v t=$((user_after - user_before)) -v hz="$ticks_per_second" -v n="$requests" \
            'BEGIN { printf "%.1f", t / hz * 1e6 / n }')
        # What the origin and the generator, which share the cores, spend per request.
        origin_us=$(awk -v t=$((origin_after - origin_before)) -v hz="$ticks_per_second" -v n="$requests" \
            'BEGIN { printf "%.1f", t / hz * 1e6 / n }')
        wrk_us=$(awk -v n="$requests" '{ printf "%.1f", ($1 + $2) * 1e6 / n }' <<<"$wrk_cpu")
        echo "$run $rps $p50 $p99 ${errors:-0} $cpu_us $origin_us $wrk_us $user_us" >> "$work/results.txt"
        echo "round $round ${label[$run]}: $rps req/s, p50 $p50 ms, p99 $p99 ms, non-2xx ${errors:-0}, CPU µs/request: front end $cpu_us (user $user_us), origin $origin_us, wrk $wrk_us" >&2
    done
done

# Full protection means every component judged every request.
unsound=
for admin_of in "botgate $admin_port" ${admin1_port:+"botgate --threads 1 $admin1_port"}; do
    failed=$(components_failed "${admin_of##* }")
    [[ -n $failed ]] && echo "${admin_of% *}: rule component calls failed: ${failed//$'\n'/, }" >&2
    failed=$(components_failed "${admin_of##* }" off)
    [[ -z $failed ]] && continue
    unsound=1
    echo "WARNING: ${admin_of% *} switched rule components off (${failed//$'\n'/, }): the (a) rows are not full protection; see $work" >&2
done
declare -A rps p50 p99 cpu user_cpu origin_cpu wrk_cpu
for run in $FRONTENDS; do
    cpu[$run]=$(awk -v r="$run" '$1==r {print $6}' "$work/results.txt" | median)
    user_cpu[$run]=$(awk -v r="$run" '$1==r {print $9}' "$work/results.txt" | median)
    origin_cpu[$run]=$(awk -v r="$run" '$1==r {print $7}' "$work/results.txt" | median)
    wrk_cpu[$run]=$(awk -v r="$run" '$1==r {print $8}' "$work/results.txt" | median)
    rps[$run]=$(awk -v r="$run" '$1==r {print $2}' "$work/results.txt" | median)
    p50[$run]=$(awk -v r="$run" '$1==r {print $3}' "$work/results.txt" | median)
    p99[$run]=$(awk -v r="$run" '$1==r {print $4}' "$work/results.txt" | median)
    [[ ${mode[$run]:-} != h2 ]] || p99[$run]=-
done
echo
echo "wrk -t$THREADS -c$CONNECTIONS -d${DURATION}s, medians of $ROUNDS interleaved rounds, $(nproc) cores"
echo
echo "| front end | requests/s | p50 ms | p99 ms | CPU µs/request: front end | of which user space | origin | wrk |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|"
for run in $FRONTENDS; do
    p99_text=–; [[ ${p99[$run]} == - ]] || printf -v p99_text '%.2f' "${p99[$run]}"
    printf '| %s | %.0f | %.2f | %s | %.1f | %.1f | %.1f | %.1f |\n' "${label[$run]}" "${rps[$run]}" "${p50[$run]}" \
        "$p99_text" "${cpu[$run]}" "${user_cpu[$run]}" "${origin_cpu[$run]}" "${wrk_cpu[$run]}"
done
echo
# The faster (requests/s) of front ends $1 and $2, of those measured.
faster() {
    [[ -n ${rps[$2]:-} ]] || { echo "$1"; return; }
    [[ -n ${rps[$1]:-} ]] || { echo "$2"; return; }
    if awk -v x="${rps[$1]}" -v y="${rps[$2]}" 'BEGIN { exit !(x >= y) }'; then echo "$1"; else echo "$2"; fi
}
# Over TLS: botgate, full protection, against nginx proxy_pass, each at its faster thread
# or worker count (as over plain HTTP, below), and at one per core each. Then with
# protection off (no target: it shows how much of a gap is the protection).
for pair in "as cs HTTPS keep-alive" "an cn a TLS handshake per request" "a2 c2 HTTP/2" \
    "bs cs HTTPS keep-alive" "b2 c2 HTTP/2"; do
    read -r mine theirs what <<<"$pair"
    m=$(faster "$mine" "${mine}1"); t=$(faster "$theirs" "${theirs}1")
    [[ -n ${rps[$m]:-} && -n ${rps[$t]:-} ]] || continue
    if [[ $mine == b* ]]; then how="protection off" target=""; else how="full protection" target=" (target ≥ 1.0×)"; fi
    per_core=""
    if [[ $m != "$mine" || $t != "$theirs" ]] && [[ -n ${rps[$mine]:-} && -n ${rps[$theirs]:-} ]]; then
        per_core=$(awk -v a="${rps[$mine]}" -v c="${rps[$theirs]}" 'BEGIN { printf "; one thread per core each: %.2f×", a/c }')
    fi
    count() { [[ $1 == *1 ]] && echo "1 $2" || echo "$(nproc) $2s"; }
    awk -v a="${rps[$m]}" -v c="${rps[$t]}" -v w="$what" -v h="$how" -v t="$target" -v p="$per_core" \
        -v cm="$(count "$m" thread)" -v ct="$(count "$t" worker)" \
        'BEGIN { printf "%s: botgate (%s, %s) / nginx (%s) throughput %.2f×%s%s\n", w, h, cm, ct, a/c, t, p }'
done
# A run where a component failed ends in failure, after its table.
finish() { [[ -z $unsound ]] || { echo "not full protection: see the WARNING above" >&2; exit 1; }; exit 0; }
[[ " $FRONTENDS " == *" a a1 b b1 c c1 d "* ]] || finish
# The targets compare each product at its faster thread count on this machine, and
# also at one thread per core each.
a=$(faster a a1); c=$(faster c c1); b=${a/a/b}
awk -v a="${rps[$a]}" -v c="${rps[$c]}" -v d="${rps[d]}" -v pa="${p99[$a]}" -v pb="${p99[$b]}" \
    -v la="${label[$a]}" -v lc="${label[$c]}" -v a2="${rps[a]}" -v c2="${rps[c]}" \
    -v ca="${cpu[$a]}" -v cb="${cpu[$b]}" -v cc="${cpu[$c]}" 'BEGIN {
    printf "faster of each: %s; %s\n", la, lc
    printf "(a)/(c) throughput: %.2f× (target ≥ 1.0×); one thread per core each: %.2f×\n", a/c, a2/c2
    printf "front-end CPU per request: (a) %.2f×, (b) %.2f× that of (c)\n", ca/cc, cb/cc
    printf "(a)/(d) throughput: %.1f× (target ≥ 10×)\n", a/d
    printf "p99 (a) − (b): %+.2f ms (target ≤ 1 ms)\n", pa-pb }'
finish
