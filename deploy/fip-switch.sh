#!/bin/sh
# fip-switch.sh: Sentinel's client-reconfig-script. After a failover it assigns the
# floating IP to the server whose store node became the master.
#
#   fip-switch.sh <master-name> <role> <state> <from-ip> <from-port> <to-ip> <to-port>
#
# Sentinel (7.0) calls it with role `leader` or `observer` and state `start` once the
# promoted replica reports itself master (its documentation says `failover`); the
# specification's reading is role `master` and state `switch`. It acts on any of these:
# every sentinel calls it, and each call first reads where the floating IP points, so
# only the first call that finds it elsewhere moves it (the others log that nothing is
# to do).
# It acts only while <to-ip> is still the master the local Sentinel knows (asked again
# before every attempt to assign, with the store's password from
# `sentinel_password_file`), so a late call from an earlier failover never moves the IP
# back.
#
# Settings: $FIP_SWITCH_CONFIG, else /etc/botgate/fip-switch.conf (rendered by
# `botgate cluster render`): `key=value` lines (provider, api, floating_ip,
# floating_ip_id, token_file, log_file, sentinel_port, sentinel_password_file; url,
# body and method for
# `generic`, with read_url and read_field, a JSON pointer, to read its assignment
# first) and one `instance <private-ip> <instance-id>` line per server.
#
# Exit status: 0 done (or nothing to do); 1 the new master's IP has no instance id
# (as the specification has it), or transient errors until the deadline (50 s, inside
# Sentinel's 60 s limit): Sentinel runs a script that exits 1 again, up to 10 times;
# 2 a permanent error (bad settings, the provider refused), which it does not retry.
# Every call to the provider is cut at the deadline (`deadline_seconds`, 1 to 55).
# Needs curl and jq.
set -u

config=${FIP_SWITCH_CONFIG:-/etc/botgate/fip-switch.conf}
log_file=
started=$(date +%s)

log() {
    line="$(date -u +%Y-%m-%dT%H:%M:%SZ) fip-switch[$$]: $*"
    echo "$line" >&2
    if [ -n "$log_file" ]; then echo "$line" >>"$log_file" 2>/dev/null || true; fi
    command -v logger >/dev/null 2>&1 && logger -t fip-switch -- "$*" 2>/dev/null
    return 0
}

if [ $# -ne 7 ]; then
    log "expected 7 arguments (master-name role state from-ip from-port to-ip to-port), got $#: $*"
    exit 2
fi
master_name=$1 role=$2 state=$3 from_ip=$4 to_ip=$6 to_port=$7

# Settings.
provider= api= floating_ip= floating_ip_id= token_file= url= body= method=POST
sentinel_password_file=
read_url_template= read_field=
sentinel_port=26379 deadline_seconds=50
instances=
if [ ! -r "$config" ]; then
    log "cannot read the settings $config"
    exit 2
fi
while IFS= read -r line || [ -n "$line" ]; do
    case $line in
    '#'* | '') continue ;;
    'instance '*)
        instances="$instances
${line#instance }"
        ;;
    *=*)
        key=${line%%=*} value=${line#*=}
        case $key in
        provider) provider=$value ;;
        api) api=${value%/} ;;
        floating_ip) floating_ip=$value ;;
        floating_ip_id) floating_ip_id=$value ;;
        token_file) token_file=$value ;;
        log_file) log_file=$value ;;
        sentinel_port) sentinel_port=$value ;;
        sentinel_password_file) sentinel_password_file=$value ;;
        deadline_seconds) deadline_seconds=$value ;;
        url) url=$value ;;
        body) body=$value ;;
        method) method=$value ;;
        read_url) read_url_template=$value ;;
        read_field) read_field=$value ;;
        *) log "$config: unknown setting '$key'"; exit 2 ;;
        esac
        ;;
    *) log "$config: cannot read the line '$line'"; exit 2 ;;
    esac
done <"$config"
case $deadline_seconds in
'' | *[!0-9]* | 0*) ok=no ;;
*) [ "$deadline_seconds" -le 55 ] && ok=yes || ok=no ;;
esac
if [ $ok = no ]; then
    log "$config: deadline_seconds must be 1 to 55 (Sentinel kills the script at 60), not '$deadline_seconds'"
    exit 2
fi
deadline=$((started + deadline_seconds))

log "called: $master_name $role $state from $from_ip to $to_ip:$to_port"
case "$role/$state" in
leader/start | observer/start | leader/failover | observer/failover | master/switch) ;;
*)
    log "role '$role', state '$state': nothing to do"
    exit 0
    ;;
esac

# The new master's instance.
instance=$(printf '%s\n' "$instances" | awk -v ip="$to_ip" '$1 == ip { print $2; exit }')
if [ -z "$instance" ]; then
    log "no instance id for the new master's IP $to_ip in $config"
    exit 1
fi

if ! token=$(head -n 1 "$token_file" 2>/dev/null) || [ -z "$token" ]; then
    log "cannot read the provider token from '$token_file'"
    exit 2
fi
for tool in curl jq; do
    command -v $tool >/dev/null 2>&1 || { log "$tool is missing (apt-get install $tool)"; exit 2; }
done

sentinel_password=
if [ -n "$sentinel_password_file" ] &&
    { ! sentinel_password=$(head -n 1 "$sentinel_password_file" 2>/dev/null) || [ -z "$sentinel_password" ]; }; then
    log "cannot read the store's password from '$sentinel_password_file'"
    exit 2
fi
# redis-cli takes it from its environment, never from a command line `ps` shows.
[ -n "$sentinel_password" ] && export REDISCLI_AUTH="$sentinel_password"

# Still the master? A late call from an earlier failover must not move the IP back.
# Asked before every attempt to assign. The Sentinel that calls this script is the
# one asked; when none answers at all the call goes on, but an answer that is no
# address (a refused password, an error) stops it until Sentinel calls again.
still_master() {
    command -v redis-cli >/dev/null 2>&1 || return 0
    current=$(timeout 5 redis-cli -h 127.0.0.1 -p "$sentinel_port" \
        --raw SENTINEL get-master-addr-by-name "$master_name" 2>/dev/null | head -n 1)
    case $current in
    '') return 0 ;;
    *[!0-9A-Fa-f.:]*)
        log "the local Sentinel did not say which node is the master: $current"
        exit 1
        ;;
    "$to_ip") return 0 ;;
    esac
    log "the local Sentinel's master is now $current, not $to_ip: nothing to do"
    exit 0
}
still_master

# A JSON value for the instance id: a number as a number (no leading zero), anything
# else as a string.
case $instance in
*[!0-9]* | 0?*) instance_json=$(jq -cn --arg v "$instance" '$v') ;;
*) instance_json=$instance ;;
esac

# One call to the provider: sets $status and $response; returns 0 on 2xx, 1 on a
# transient failure (network, 423, 429, 5xx, and Hetzner's, DigitalOcean's and
# Vultr's 409 of a floating IP busy with another action), 2 on a permanent one.
call() {
    call_method=$1 call_url=$2 call_body=${3:-}
    # No call outlives the deadline.
    left=$((deadline - $(date +%s)))
    if [ $left -lt 1 ]; then
        response="no time left before the deadline" status=000
        return 1
    fi
    max_time=$((left < 10 ? left : 10))
    connect_time=$((max_time < 5 ? max_time : 5))
    # The token goes to curl on its standard input, never on a command line that
    # `ps` shows.
    if [ -n "$call_body" ]; then
        output=$(printf 'header = "Authorization: Bearer %s"\n' "$token" |
            curl -sS -K - --connect-timeout $connect_time --max-time $max_time -X "$call_method" \
                -H "Content-Type: application/json" \
                --data "$call_body" -w '\n%{http_code}' "$call_url" 2>&1)
    else
        output=$(printf 'header = "Authorization: Bearer %s"\n' "$token" |
            curl -sS -K - --connect-timeout $connect_time --max-time $max_time -X "$call_method" \
                -w '\n%{http_code}' "$call_url" 2>&1)
    fi
    code=$?
    status=$(printf '%s\n' "$output" | tail -n 1)
    response=$(printf '%s\n' "$output" | sed '$d')
    if [ $code -ne 0 ]; then
        response=$output status=000
        return 1
    fi
    case $status in
    2??) return 0 ;;
    423 | 429 | 5?? | 000) return 1 ;;
    # Busy with another action, at the providers known to say so; a generic API's
    # 409 may mean "already so", which no retry changes.
    409) [ "$provider" = generic ] && return 2 || return 1 ;;
    *) return 2 ;;
    esac
}

# Calls until done, a permanent error or the deadline; exits on failure. With `assign`
# first, asks the local Sentinel before each attempt.
call_until_done() {
    assigning=no
    if [ "$1" = assign ]; then
        assigning=yes
        shift
    fi
    wait_for=1
    while :; do
        [ $assigning = yes ] && still_master
        call "$@"
        result=$?
        [ $result -eq 0 ] && return 0
        log "$1 $2: HTTP $status: $response"
        if [ $result -eq 2 ]; then
            exit 2
        fi
        if [ $(($(date +%s) + wait_for)) -ge "$deadline" ]; then
            log "giving up for now: the provider did not answer in time (Sentinel calls again)"
            exit 1
        fi
        sleep $wait_for
        wait_for=$((wait_for * 2))
        [ $wait_for -gt 8 ] && wait_for=8
    done
}

case $provider in
hetzner)
    read_url="$api/v1/floating_ips/$floating_ip_id"
    assigned='.floating_ip.server // empty'
    assign_url="$api/v1/floating_ips/$floating_ip_id/actions/assign"
    assign_body="{\"server\":$instance_json}"
    ;;
digitalocean)
    read_url="$api/v2/reserved_ips/$floating_ip"
    assigned='.reserved_ip.droplet.id // empty'
    assign_url="$api/v2/reserved_ips/$floating_ip/actions"
    assign_body="{\"type\":\"assign\",\"droplet_id\":$instance_json}"
    ;;
vultr)
    read_url="$api/v2/reserved-ips/$floating_ip_id"
    assigned='.reserved_ip.instance_id // empty'
    assign_url="$api/v2/reserved-ips/$floating_ip_id/attach"
    assign_body="{\"instance_id\":$(jq -cn --arg v "$instance" '$v')}"
    ;;
generic)
    # `read_url` and `read_field` (a JSON pointer) when the API can tell the assignment.
    read_url=$(printf '%s' "$read_url_template" | sed -e "s|{floating_ip}|$floating_ip|g")
    assigned='getpath($pointer | ltrimstr("/") | split("/") | map(tonumber? // .)) // empty'
    assign_url=$(printf '%s' "$url" | sed -e "s|{floating_ip}|$floating_ip|g" -e "s|{instance_id}|$instance|g")
    assign_body=$(printf '%s' "$body" | sed -e "s|{floating_ip}|$floating_ip|g" -e "s|{instance_id}|$instance|g")
    ;;
*)
    log "unknown provider '$provider' in $config"
    exit 2
    ;;
esac

if [ -n "$read_url" ]; then
    call_until_done GET "$read_url"
    now=$(printf '%s' "$response" | jq -r --arg pointer "$read_field" "$assigned" 2>/dev/null)
    if [ "$now" = "$instance" ]; then
        log "the floating IP $floating_ip already points to instance $instance: nothing to do"
        exit 0
    fi
    log "the floating IP $floating_ip points to '${now:-nothing}'; assigning it to instance $instance ($to_ip)"
    call_until_done assign "$method" "$assign_url" "$assign_body"
else
    log "assigning the floating IP $floating_ip to instance $instance ($to_ip)"
    call_until_done assign "$method" "$assign_url" "$assign_body"
fi
assigned_with="HTTP $status: $response"
# Hetzner carries an assignment out as an action: it is done when the action succeeds.
if [ "$provider" = hetzner ]; then
    action=$(printf '%s' "$response" | jq -r '.action.id // empty' 2>/dev/null)
    while [ -n "$action" ]; do
        case $(printf '%s' "$response" | jq -r '.action.status // empty' 2>/dev/null) in
        success)
            log "the provider's action $action succeeded"
            break
            ;;
        error)
            log "the provider's action $action failed: $(printf '%s' "$response" | jq -c '.action.error' 2>/dev/null)"
            exit 1
            ;;
        esac
        if [ $(($(date +%s) + 1)) -ge "$deadline" ]; then
            log "the provider's action $action has not finished: giving up for now (Sentinel calls again)"
            exit 1
        fi
        sleep 1
        call_until_done GET "$api/v1/floating_ips/actions/$action"
    done
fi
log "assigned: $assigned_with"
exit 0
