#!/usr/bin/env bash
# The two distributed Redis topologies Tollgate is tested on, on fixed loopback ports:
#   cluster:  6 nodes 127.0.0.1:7100-7105 (3 masters, 1 replica each)
#   sentinel: master 127.0.0.1:7200, replica 127.0.0.1:7201, sentinels 27200-27202,
#             master name "tollgate"
#
#   redis-topologies.sh up [cluster|sentinel|all]     start what is not running (default all)
#   redis-topologies.sh down [cluster|sentinel|all]   stop the nodes and forget their state
#   redis-topologies.sh status
#   redis-topologies.sh start-node PORT               restart one node (after a failover test)
#
# Idempotent: a node that answers is reused; a stopped node of a formed cluster is started
# again with its nodes.conf and rejoins (as a replica when its slots moved on); a stopped
# node of the Sentinel set comes back as a replica of whichever node the sentinels name.
# Data lives in $TOLLGATE_TOPOLOGY_DIR (default: $TMPDIR/tollgate-redis-topologies);
# nothing is saved to disk but the cluster's and the sentinels' own config files.
set -euo pipefail

DIR="${TOLLGATE_TOPOLOGY_DIR:-${TMPDIR:-/tmp}/tollgate-redis-topologies}"
CLUSTER_PORTS=(7100 7101 7102 7103 7104 7105)
SENTINEL_DATA_PORTS=(7200 7201)
SENTINEL_PORTS=(27200 27201 27202)
MASTER_NAME=tollgate
# Short timeouts: a dead master is replaced in about two seconds (tests kill one).
CLUSTER_NODE_TIMEOUT_MS=1000
SENTINEL_DOWN_AFTER_MS=1000
SENTINEL_FAILOVER_TIMEOUT_MS=5000

log() { printf '[topologies] %s\n' "$*" >&2; }
cli() { local port=$1; shift; timeout 5 redis-cli -h 127.0.0.1 -p "$port" "$@" 2>/dev/null; }
answers() { [ "$(cli "$1" PING || true)" = PONG ]; }
wait_for() { # wait_for TRIES DELAY COMMAND...
  local tries=$1 delay=$2; shift 2
  for _ in $(seq 1 "$tries"); do "$@" && return 0; sleep "$delay"; done
  return 1
}

require_redis() {
  command -v redis-server >/dev/null && command -v redis-cli >/dev/null && return 0
  log "installing redis-server"
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server) >/dev/null
}

# --- cluster ---------------------------------------------------------------------------

# Whether another node still sees the node of this id as a master serving slots.
still_serving_slots() {
  local id=$1 port
  for port in "${CLUSTER_PORTS[@]}"; do
    cli "$port" CLUSTER NODES | awk -v id="$id" '$1 == id && $3 ~ /master/ && NF > 8 { found = 1 } END { exit !found }' && return 0
  done
  return 1
}

# A master killed by a test and started again before its replica took over would come back
# empty (nothing is persisted) and still serving its slots, and its replica would copy the
# empty set: every key of those slots lost. So a node is started only after the failover (or
# after 20 s, when it has no replica left to take over).
await_failover_of() {
  local conf="$DIR/cluster/$1/nodes.conf" id
  [ -f "$conf" ] || return 0
  id=$(awk '/myself/ { print $1 }' "$conf")
  [ -n "$id" ] || return 0
  still_serving_slots "$id" || return 0
  log "waiting for node $1's replica to take over before starting it again"
  wait_for 100 0.2 eval '! still_serving_slots "$id"' || log "no failover of node $1 in 20 s: starting it anyway"
}

start_cluster_node() {
  local port=$1 dir="$DIR/cluster/$1"
  answers "$port" && return 0
  await_failover_of "$port"
  mkdir -p "$dir"
  redis-server --port "$port" --bind 127.0.0.1 --daemonize yes --dir "$dir" \
    --cluster-enabled yes --cluster-config-file nodes.conf \
    --cluster-node-timeout "$CLUSTER_NODE_TIMEOUT_MS" --cluster-replica-validity-factor 0 \
    --cluster-allow-reads-when-down no \
    --save "" --appendonly no --pidfile "$dir/redis.pid" --logfile "$dir/redis.log" >/dev/null 9>&-
  wait_for 50 0.1 answers "$port" || { log "cluster node $port did not start (see $dir/redis.log)"; return 1; }
}

# The masters serving slots as one node sees them: "address slots..." per master, sorted.
slot_map() {
  cli "$1" CLUSTER NODES | awk '$3 ~ /master/ && $3 !~ /fail/ && NF > 8 { s = $2; for (i = 9; i <= NF; i++) s = s " " $i; print s }' | sort
}

cluster_ok() {
  local port first
  for port in "${CLUSTER_PORTS[@]}"; do
    cli "$port" CLUSTER INFO | grep -q '^cluster_state:ok' || return 1
  done
  # Every node sees six nodes, none of them failed.
  [ "$(cli "${CLUSTER_PORTS[0]}" CLUSTER NODES | grep -cv 'fail')" -eq 6 ] || return 1
  # And all agree on three masters and their slots: a node just started again (or one that
  # has not yet heard of a failover) may still see its old master, and a client or test that
  # asks it would be misled.
  first=$(slot_map "${CLUSTER_PORTS[0]}")
  [ "$(printf '%s\n' "$first" | grep -c .)" -eq 3 ] || return 1
  for port in "${CLUSTER_PORTS[@]:1}"; do
    [ "$(slot_map "$port")" = "$first" ] || return 1
  done
}

cluster_formed() { [ "$(cli "$1" CLUSTER INFO | sed -n 's/^cluster_known_nodes:\([0-9]*\).*/\1/p')" -gt 1 ] 2>/dev/null; }

cluster_up() {
  local port formed=0
  for port in "${CLUSTER_PORTS[@]}"; do start_cluster_node "$port"; done
  for port in "${CLUSTER_PORTS[@]}"; do cluster_formed "$port" && formed=1; done
  if [ "$formed" -eq 0 ]; then
    log "creating the cluster on ${CLUSTER_PORTS[*]}"
    local nodes=()
    for port in "${CLUSTER_PORTS[@]}"; do nodes+=("127.0.0.1:$port"); done
    timeout 60 redis-cli --cluster create "${nodes[@]}" --cluster-replicas 1 --cluster-yes >/dev/null
  fi
  wait_for 150 0.2 cluster_ok || { log "the cluster is not ok:"; cli "${CLUSTER_PORTS[0]}" CLUSTER NODES >&2; return 1; }
  log "cluster ok on 127.0.0.1:${CLUSTER_PORTS[0]}-${CLUSTER_PORTS[5]}"
}

# --- sentinel --------------------------------------------------------------------------

sentinel_master_port() { # the port the sentinels name as master, empty when none answers
  local port
  for port in "${SENTINEL_PORTS[@]}"; do
    local reply
    reply=$(cli "$port" SENTINEL get-master-addr-by-name "$MASTER_NAME" | sed -n 2p) || true
    if [ -n "$reply" ]; then echo "$reply"; return 0; fi
  done
}

start_sentinel_data_node() {
  local port=$1 dir="$DIR/sentinel/$1"
  answers "$port" && return 0
  # The same for the Sentinel set: a killed master comes back only as a replica of the new one.
  if [ "$(sentinel_master_port)" = "$port" ]; then
    log "waiting for the sentinels to promote another node than $port before starting it again"
    wait_for 100 0.2 eval '[ "$(sentinel_master_port)" != "$port" ]' || log "no failover of $port in 20 s: starting it anyway"
  fi
  mkdir -p "$dir"
  local master
  master=$(sentinel_master_port)
  master=${master:-${SENTINEL_DATA_PORTS[0]}}
  local replicaof=()
  [ "$master" != "$port" ] && replicaof=(--replicaof 127.0.0.1 "$master")
  redis-server --port "$port" --bind 127.0.0.1 --daemonize yes --dir "$dir" \
    --save "" --appendonly no --pidfile "$dir/redis.pid" --logfile "$dir/redis.log" \
    "${replicaof[@]}" >/dev/null 9>&-
  wait_for 50 0.1 answers "$port" || { log "redis $port did not start (see $dir/redis.log)"; return 1; }
}

start_sentinel() {
  local port=$1 dir="$DIR/sentinel/s$1"
  answers "$port" && return 0
  mkdir -p "$dir"
  # A sentinel rewrites its own config file (what it learned about the set): keep it.
  if [ ! -f "$dir/sentinel.conf" ]; then
    cat >"$dir/sentinel.conf" <<EOF
port $port
bind 127.0.0.1
dir $dir
sentinel resolve-hostnames no
sentinel monitor $MASTER_NAME 127.0.0.1 ${SENTINEL_DATA_PORTS[0]} 2
sentinel down-after-milliseconds $MASTER_NAME $SENTINEL_DOWN_AFTER_MS
sentinel failover-timeout $MASTER_NAME $SENTINEL_FAILOVER_TIMEOUT_MS
sentinel parallel-syncs $MASTER_NAME 1
EOF
  fi
  redis-server "$dir/sentinel.conf" --sentinel --daemonize yes --pidfile "$dir/sentinel.pid" --logfile "$dir/sentinel.log" >/dev/null 9>&-
  wait_for 50 0.1 answers "$port" || { log "sentinel $port did not start (see $dir/sentinel.log)"; return 1; }
}

sentinel_ok() {
  local master replicas port
  master=$(sentinel_master_port)
  [ -n "$master" ] && cli "$master" ROLE | head -1 | grep -q '^master$' || return 1
  replicas=$(cli "$master" INFO replication | grep -c '^slave[0-9]*:.*state=online' || true)
  [ "$replicas" -ge 1 ] || return 1
  for port in "${SENTINEL_PORTS[@]}"; do
    [ "$(cli "$port" SENTINEL master "$MASTER_NAME" | grep -A1 '^num-other-sentinels$' | tail -1)" = 2 ] || return 1
    cli "$port" SENTINEL master "$MASTER_NAME" | grep -A1 '^flags$' | tail -1 | grep -qv 'down' || return 1
  done
}

sentinel_up() {
  local port
  # Data nodes first when no sentinel knows better (a fresh start); else sentinels first,
  # so a restarted node asks them who the master is.
  if [ -z "$(sentinel_master_port)" ]; then
    for port in "${SENTINEL_DATA_PORTS[@]}"; do start_sentinel_data_node "$port"; done
    for port in "${SENTINEL_PORTS[@]}"; do start_sentinel "$port"; done
  else
    for port in "${SENTINEL_PORTS[@]}"; do start_sentinel "$port"; done
    for port in "${SENTINEL_DATA_PORTS[@]}"; do start_sentinel_data_node "$port"; done
  fi
  wait_for 150 0.2 sentinel_ok || { log "the sentinel set is not ok"; return 1; }
  log "sentinel ok: master $MASTER_NAME at 127.0.0.1:$(sentinel_master_port), sentinels ${SENTINEL_PORTS[*]}"
}

# --- stop ------------------------------------------------------------------------------

stop_port() { cli "$1" SHUTDOWN NOSAVE >/dev/null || true; }

down() {
  local what=$1 port
  if [ "$what" = cluster ] || [ "$what" = all ]; then
    for port in "${CLUSTER_PORTS[@]}"; do stop_port "$port"; done
    rm -rf "$DIR/cluster"
  fi
  if [ "$what" = sentinel ] || [ "$what" = all ]; then
    for port in "${SENTINEL_PORTS[@]}" "${SENTINEL_DATA_PORTS[@]}"; do stop_port "$port"; done
    rm -rf "$DIR/sentinel"
  fi
}

status() {
  local port
  for port in "${CLUSTER_PORTS[@]}" "${SENTINEL_DATA_PORTS[@]}" "${SENTINEL_PORTS[@]}"; do
    if answers "$port"; then echo "$port up"; else echo "$port down"; fi
  done
  cluster_ok && echo "cluster ok" || echo "cluster not ok"
  sentinel_ok && echo "sentinel ok (master $(sentinel_master_port))" || echo "sentinel not ok"
}

command=${1:-up}
what=${2:-all}
case "$command" in
  up)
    require_redis
    mkdir -p "$DIR"
    # One setup at a time: test files run in parallel and may all ask at once.
    exec 9>"$DIR/.lock"
    flock -w 120 9 || { log "another setup holds $DIR/.lock"; exit 1; }
    if [ "$what" = cluster ] || [ "$what" = all ]; then cluster_up; fi
    if [ "$what" = sentinel ] || [ "$what" = all ]; then sentinel_up; fi
    ;;
  down) down "$what" ;;
  status) status ;;
  start-node)
    port=${2:?port}
    mkdir -p "$DIR"
    exec 9>"$DIR/.lock"
    flock -w 120 9 || { log "another setup holds $DIR/.lock"; exit 1; }
    if [[ " ${CLUSTER_PORTS[*]} " == *" $port "* ]]; then start_cluster_node "$port"; wait_for 150 0.2 cluster_ok
    elif [[ " ${SENTINEL_DATA_PORTS[*]} " == *" $port "* ]]; then start_sentinel_data_node "$port"; wait_for 150 0.2 sentinel_ok
    else log "not a topology node: $port"; exit 2
    fi
    ;;
  *) echo "usage: $0 up|down|status [cluster|sentinel|all] | start-node PORT" >&2; exit 2 ;;
esac
